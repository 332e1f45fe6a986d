"""Architecture: a compute-capability family and the features it has."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import BoolFact, NumFact, Record, Ref


class Architecture(Record):
    kind: Literal["architecture"] = Field(description="Record kind")
    vendor: str = Field(default="nvidia", description="nvidia or amd")
    family: str = Field(description="Marketing family: ampere, ada, hopper, blackwell, ...")
    compute_capability: str | None = Field(
        default=None, pattern=r"^[0-9]+\.[0-9]+$", description="CUDA compute capability, e.g. 9.0"
    )
    extends: Ref | None = Field(default=None, description="Architecture whose features this one inherits")
    fp8_tensor_cores: BoolFact | None = Field(default=None, description="FP8 tensor-core matmul")
    fp4_tensor_cores: BoolFact | None = Field(default=None, description="FP4 tensor-core matmul")
    wgmma: BoolFact | None = Field(default=None, description="Warpgroup MMA (wgmma) instructions")
    tma: BoolFact | None = Field(default=None, description="Tensor Memory Accelerator (bulk tensor copies)")
    tmem_tcgen05: BoolFact | None = Field(default=None, description="Tensor memory and tcgen05 UMMA")
    smem_per_sm_kib: NumFact | None = Field(default=None, description="Max shared memory per SM, KiB")
    smem_per_block_kib: NumFact | None = Field(default=None, description="Max opt-in shared memory per block, KiB")
    tmem_kib: NumFact | None = Field(default=None, description="Tensor memory per SM, KiB")

    def refs(self) -> list[tuple[str, str]]:
        return [("extends", self.extends)] if self.extends else []
