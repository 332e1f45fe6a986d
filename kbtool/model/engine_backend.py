"""Engine backend: how a serving engine exposes kernels; its own gates are claims whose subject it is."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Condition, Record, Ref, Strict, VersionRange

Platform = Literal["cuda", "rocm", "npu", "xpu", "cpu", "musa", "mps"]
Layout = Literal["mha", "gqa", "mqa", "mla", "sparse-mla"]


class KernelCall(Strict):
    """One kernel as the engine calls it: the build (the engine's own fork, a copy it vendors, or an upstream package)
    and the shapes it passes, which the kernel layer judges instead of the model's plain head dims."""

    kernel: Ref = Field(description="The kernel record the engine calls")
    build: str = Field(description="The build called, named as claims' scope ranges name libraries (vllm-flash-attn-3: "
                                   "vLLM's FA-3 fork compiled into its wheel); a claim applies to this call only "
                                   "where a range of its scope names this build")
    fork_of: str | None = Field(default=None, description="The upstream library the build forks or copies; a claim "
                                                          "about upstream reaches the build only by a scope range "
                                                          "naming the build with the same fork_of")
    bundled: bool = Field(default=True, description="The build ships inside the engine's wheel: its version is the "
                                                    "engine's release (false: the query's version of the build)")
    phases: list[Literal["prefill", "decode"]] = Field(default_factory=list,
                                                       description="Phases it serves (empty: every phase)")
    attention: list[Layout] = Field(default_factory=list, description="Layouts it serves (empty: every layout the "
                                                                      "backend serves)")
    when: Condition | None = Field(default=None, description="Where the engine makes this call (sm, head_dim, ...): "
                                                             "the engine's own routing, from its code")
    shape: dict[str, str | int] = Field(default_factory=dict, description="Query variables the call sets: the name "
                                        "of the query variable whose value it passes (head_dim: qk_rope_head_dim), "
                                        "or a number")
    call: str = Field(description="The call in words: entry point, tensors and their head dims, layout, paged or not")
    source: int = Field(ge=0, description="Index into the record's sources: the engine's file for that release")
    scope: list[VersionRange] = Field(default_factory=list, description="Engine releases making this call (empty: "
                                                                        "every release the backend is in)")


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
    calls: list[KernelCall] = Field(
        default_factory=list, description="The kernel builds it calls and how (empty: not recorded; the kernel layer "
                                          "then judges its kernels from any build's claims, as a caveat)"
    )

    def refs(self) -> list[tuple[str, str]]:
        return [("runs", k) for k in self.kernels] + [("calls", c.kernel) for c in self.calls]
