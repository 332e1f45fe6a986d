"""Engine priority: the order in which an engine tries its attention backends, per platform and release.

vLLM picks the first backend of the applicable list whose own checks pass (vllm/platforms/cuda.py). Each
list applies where its `when` holds; the first list that holds is the one the engine uses.

SGLang does not walk a list: it resolves its server arguments in one ordered pipeline of hooks
(sglang/srt/arg_groups/pipeline.py) that fill defaults, force settings and raise on what they refuse. Its
records keep that pipeline as `steps`, run in order by kbtool/solve/engines/sglang/resolve.py: a step sets fields
(`set`, where `when` holds, keeping the values in `keep`), picks a default from this record's `lists`
(`pick`), or runs a claim (`check`: the claim's refusal is the error SGLang raises there). The first failing
check is the error SGLang reports.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import Condition, Record, Ref, Scalar, Strict, VersionRange, given, schema_rule


class PriorityList(Strict):
    when: Condition | None = Field(default=None, description="Where this list applies (default: always)")
    order: list[Ref] = Field(min_length=1, description="Engine-backend records, most preferred first")
    notes: str | None = Field(default=None, description="Why the order is what it is, per the source")


class Copy(Strict):
    """A value taken from another variable of the resolution state (optionally multiplied)."""

    var: str = Field(description="The variable whose current value is copied")
    times: int = Field(default=1, ge=1, description="Multiplier for a number")


class Step(Strict):
    """One step of an engine's argument resolution: exactly one of `set`, `pick`, `check`."""

    model_config = schema_rule({"oneOf": [{"required": [k]} for k in ("set", "pick", "check")]})

    name: str = Field(min_length=1, description="The engine's hook or pass that does this (e.g. _page_size_default)")
    when: Condition | None = Field(default=None, description="Where the step applies (default: always)")
    set: dict[str, Scalar | Copy] | None = Field(
        default=None, description="Fields it sets: a literal, or {var, times} to copy another field")
    keep: dict[str, list[Scalar]] = Field(
        default_factory=dict, description="Per field: the current values the step leaves as they are")
    pick: str | None = Field(
        default=None, description="Field it fills with the first backend of the first of `lists` whose when holds")
    check: Ref | None = Field(default=None, description="A claim: where it refuses, the engine raises its message here")
    source: int | None = Field(default=None, ge=0, description="Index into the record's sources")
    notes: str | None = Field(default=None, description="What the step does, in our words")

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        given = [k for k in ("set", "pick", "check") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"a step takes exactly one of set, pick, check; got {given}")
        return self


class Constant(Strict):
    """A number a formula of the resolver reads (e.g. a memory reserve term), with its source."""

    value: float | int = Field(description="The value")
    unit: str | None = Field(default=None, description="Unit, e.g. MiB")
    source: int | None = Field(default=None, ge=0, description="Index into the record's sources")
    notes: str | None = Field(default=None, description="Where and how the engine uses it")


class PrefillList(Strict):
    """One of vLLM's MLA prefill orders: the backends it tries, in order, where `when` holds."""

    when: Condition | None = Field(default=None, description="Where this order applies (default: always)")
    order: list[str] = Field(
        min_length=1, description="vLLM's MLA prefill backend names (MLAPrefillBackendEnum), most preferred first, "
        "exactly as the release lists them")
    refused: dict[str, str] = Field(
        default_factory=dict, description="Backends of `order` that the release's own check refuses under its "
        "default settings, each with why (kb skips them, as vLLM does)")
    source: int = Field(ge=0, description="Index into the record's sources: where the release builds this order")
    notes: str | None = Field(default=None, description="What the source says, in our words")


class PrefillCall(Strict):
    """The kernel entry point a prefill backend calls, with its source."""

    call: str = Field(min_length=1, description="Shown after the backend's name, e.g. varlen")
    source: int = Field(ge=0, description="Index into the record's sources: where the backend calls it")
    notes: str | None = Field(default=None, description="What it calls, in our words")


class MlaPrefill(Strict):
    """How the release picks the backend that runs MLA prefill (uncompressed q/k/v, apart from the MLA decode
    backend the priority lists choose)."""

    lists: list[PrefillList] = Field(min_length=1, description="Prefill orders; the first whose `when` holds")
    calls: dict[str, PrefillCall] = Field(
        default_factory=dict, description="Per prefill backend name, the kernel entry point it calls, shown after "
        "the name (FLASH_ATTN: varlen, FlashAttention's flash_attn_varlen_func)")
    notes: str | None = Field(default=None, description="Where the selection lives in this release, in our words")


class EnginePriority(Record):
    model_config = schema_rule({"if": {"properties": {"engine": {"const": "vllm"}}, "required": ["engine"]},
                                "then": given("mla_prefill")})

    kind: Literal["engine-priority"] = Field(description="Record kind")
    engine: Literal["vllm", "sglang", "trtllm"] = Field(description="Serving engine")
    platform: Literal["cuda", "rocm"] = Field(description="The engine platform whose selection this is")
    scope: list[VersionRange] = Field(min_length=1, description="Engine releases these lists hold for")
    lists: list[PriorityList] = Field(min_length=1, description="Priority lists; the first whose `when` holds")
    steps: list[Step] = Field(
        default_factory=list, description="The engine's resolution pipeline, in order (SGLang); empty for vLLM")
    constants: dict[str, Constant] = Field(
        default_factory=dict, description="Numbers the resolver's formulas read (memory reserve terms)")
    mla_prefill: MlaPrefill | None = Field(
        default=None, description="vLLM: the MLA prefill backend order of this release and platform (required for "
        "vLLM records)")

    @model_validator(mode="after")
    def _vllm_has_prefill(self) -> EnginePriority:
        if self.mla_prefill is None and self.engine == "vllm":
            raise ValueError("a vLLM record needs `mla_prefill`: the release's MLA prefill backend order, read from "
                             "its source (or, where it has no such selection, the path it takes)")
        return self

    def refs(self) -> list[tuple[str, str]]:
        out = [("tries", b) for pl in self.lists for b in pl.order]
        out += [("checks", s.check) for s in self.steps if s.check]
        return out
