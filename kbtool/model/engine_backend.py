"""Engine backend: how a serving engine exposes kernels; its own gates are claims whose subject it is."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Record, Ref, VersionRange

Platform = Literal["cuda", "rocm", "npu", "xpu", "cpu", "musa", "mps"]
Layout = Literal["mha", "gqa", "mqa", "mla", "sparse-mla"]


def _mha_gqa() -> list[Layout]:
    return ["mha", "gqa"]


class EngineBackend(Record):
    kind: Literal["engine-backend"] = Field(description="Record kind")
    engine: Literal["vllm", "sglang", "trtllm"] = Field(description="Serving engine")
    backend_name: str = Field(description="The engine's own name for it, e.g. FLASH_ATTN")
    kernels: list[Ref] = Field(
        default_factory=list, description="Kernel records this backend can run (empty: the KB has no record of them)"
    )
    attention: list[Layout] = Field(
        default_factory=_mha_gqa, description="Attention layouts it serves"
    )
    platforms: list[Platform] = Field(
        default_factory=list, description="The device platforms it runs on (empty: any the engine runs on)"
    )
    scope: list[VersionRange] = Field(
        default_factory=list, description="Engine releases that register it (empty: every recorded release)"
    )

    def refs(self) -> list[tuple[str, str]]:
        return [("runs", k) for k in self.kernels]
