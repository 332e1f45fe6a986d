"""Accelerator: one product, with its numbers and the basis of each."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Fact, NumFact, Record, Ref


class Accelerator(Record):
    kind: Literal["accelerator"] = Field(description="Record kind")
    vendor: str = Field(description="nvidia or amd")
    architecture: Ref = Field(description="Architecture record id, e.g. sm90")
    form_factor: str | None = Field(default=None, description="sxm, pcie, oam, superchip, consumer card, ...")
    device_names: list[Fact[str]] = Field(
        default_factory=list,
        description="The exact names the driver reports for this product (nvidia-smi's name, torch.cuda."
        "get_device_name), each with its source: `kb probe` maps the GPU it runs on to this record by them, else by "
        "the name and aliases as whole words (kbtool/names.py match_device)")
    sm_count: NumFact | None = Field(default=None, description="Streaming multiprocessors (CUs on AMD)")
    memory_gb: NumFact | None = Field(default=None, description="Device memory as marketed, GB (1e9 bytes)")
    memory_bytes: NumFact | None = Field(default=None, description="Device memory as reported by the driver")
    memory_type: str | None = Field(default=None, description="HBM3, HBM3e, GDDR6X, ...")
    memory_bandwidth_tbs: NumFact | None = Field(default=None, description="Peak memory bandwidth, TB/s")
    l2_mb: NumFact | None = Field(default=None, description="L2 cache, MB")
    bf16_dense_tflops: NumFact | None = Field(default=None, description="Dense BF16 tensor rate, TFLOP/s")
    fp8_dense_tflops: NumFact | None = Field(default=None, description="Dense FP8 tensor rate, TFLOP/s")
    tdp_w: NumFact | None = Field(default=None, description="Board power, W")

    def refs(self) -> list[tuple[str, str]]:
        return [("architecture", self.architecture)]

    def capacity_bytes(self) -> int | None:
        """Usable memory in bytes: the driver's figure if recorded, else the marketed GB."""
        if self.memory_bytes is not None:
            return int(self.memory_bytes.value)
        if self.memory_gb is not None:
            return int(self.memory_gb.value * 1e9)
        return None
