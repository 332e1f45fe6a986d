"""JSON Schema of the query answer, committed as schema/query-answer.schema.json.

The solver builds plain objects (kbtool/solve/answer.py, no pydantic on the query path); these pydantic
mirrors of them exist only to generate the schema. tests/solve/test_answer.py keeps the two in step.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Verdict = Literal["yes", "no", "conditional", "unknown"]
KernelStatus = Literal["ok", "caveat", "rejected", "unknown"]
VerificationLabel = Literal["verified", "unverified", "refuted", "disputed", "untestable", "structural"]
"""`structural`: a reason derived from the records' structure (phases, layouts, engine wiring), not a claim."""


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Reason(_M):
    claim: str = Field(description="Claim id")
    code: str = Field(description="Stable reason code")
    message: str = Field(description="Message with the observed and allowed values filled in")
    observed: Any = Field(default=None, description="The query's value of the deciding variable")
    allowed: Any = Field(default=None, description="The values that would pass")
    verification: VerificationLabel = Field(description="The claim's verification status")
    enforced: bool = Field(default=True, description="False for refuted claims: shown, not enforced")
    layer: Literal["kernel", "engine"] = Field(default="kernel", description="Which layer's gate it is")
    depends_on: list[str] = Field(default_factory=list, description="Inputs not given that decide it")
    evidence: list[str] = Field(default_factory=list, description="Evidence records, for verified claims")
    verified_on: list[str] = Field(default_factory=list,
                                   description="Architectures the evidence ran on; a verified or refuted status "
                                   "says nothing about other architectures")
    sources: list[str] = Field(default_factory=list, description="Where the claim comes from")
    phase: str | None = Field(default=None, description="The phase it applies to, when not every phase")
    subject: str | None = Field(default=None, description="The record the claim is about")
    scope: str | None = Field(default=None, description="Versions the claim is scoped to")
    workaround: str | None = Field(default=None, description="What to do instead")


class KernelAnswer(_M):
    id: str = Field(description="Kernel id")
    status: KernelStatus = Field(description="ok, caveat, rejected or unknown (worst over its phases)")
    phase_status: dict[str, KernelStatus] = Field(default_factory=dict, description="Status per phase evaluated")
    library: str | None = Field(default=None, description="Library, as used in version scopes")
    gates: int = Field(default=0, description="Gate claims (reject/caveat) the KB records for it")
    via: list[str] = Field(default_factory=list, description="Engine backends that reach it (--engine)")
    reasons: list[Reason] = Field(default_factory=list, description="Gates that reject it or leave it unknown")
    caveats: list[Reason] = Field(default_factory=list, description="Caveats that apply")
    workarounds: list[str] = Field(default_factory=list, description="What to do instead")
    refuted: list[Reason] = Field(default_factory=list, description="Refuted gates, not enforced")
    rank: int | None = Field(default=None, description="Rank by measured latency, where measured")
    measured: dict[str, Any] | None = Field(default=None, description="Measured latency used for ranking")


class BackendAnswer(_M):
    """An engine backend (with --engine): its own gates and the kernels it reaches."""

    id: str = Field(description="Engine-backend id")
    backend_name: str = Field(description="The engine's own name for it")
    status: KernelStatus = Field(description="Worst over phases of: its own gates and its best kernel")
    phase_status: dict[str, KernelStatus] = Field(default_factory=dict, description="Status per phase")
    kernels: dict[str, KernelStatus] = Field(default_factory=dict, description="Kernel-layer status of its kernels")
    reasons: list[Reason] = Field(default_factory=list, description="Engine-layer (and kernel-layer) reasons")
    caveats: list[Reason] = Field(default_factory=list, description="Caveats that apply")
    refuted: list[Reason] = Field(default_factory=list, description="Refuted gates, not enforced")


class Memory(_M):
    fits: bool | None = Field(description="Whether weights + KV cache fit; null without a model")
    kv_bytes: int = Field(description="KV-cache bytes for the batch at ctx, per GPU")
    kv_bytes_per_token: float = Field(default=0, description="KV bytes per token, per GPU")
    weights_bytes: int = Field(description="Weight bytes per GPU")
    available_bytes: int = Field(description="capacity x utilization - weights, per GPU")
    capacity_bytes: int = Field(default=0, description="Device memory used for the calculation")
    max_ctx: int = Field(description="Largest context that fits at this batch")
    formula: str = Field(description="The formula with the numbers filled in")
    notes: list[str] = Field(default_factory=list, description="Assumptions")


class Answer(_M):
    query: dict[str, Any] = Field(description="The normalized inputs")
    verdict: Verdict = Field(description="yes, no, conditional or unknown")
    summary: str = Field(description="One sentence")
    kernels: list[KernelAnswer] = Field(description="Every candidate kernel with its status")
    memory: Memory | None = Field(description="KV fit; null when no model or no GPU was given")
    claims_used: list[str] = Field(description="Claims that were evaluated")
    depends_on: list[str] = Field(default_factory=list, description="Inputs that would decide unknowns")
    backends: list[BackendAnswer] = Field(default_factory=list, description="Engine backends (with --engine)")
    caveats: list[Reason] = Field(default_factory=list, description="Caveats about the accelerator itself")
    assumed: dict[str, Any] = Field(default_factory=dict, description="Defaults used for inputs not given")
    notes: list[str] = Field(default_factory=list, description="Other remarks")
    ranking: dict[str, Any] | None = Field(default=None, description="Measurement-based ranking, if any")
    engine: dict[str, Any] | None = Field(default=None, description="With --engine vllm: the backend vLLM would "
                                          "select, its priority list, each backend's refusal reasons and, for MLA, "
                                          "the prefill path, decode backend and KV layout; null otherwise")


class MultiAnswer(_M):
    """Without --gpu: one answer per accelerator."""

    query: dict[str, Any] = Field(description="The normalized inputs")
    rows: list[Answer] = Field(description="One answer per accelerator")
    summary: str = Field(default="", description="One sentence over all rows")


def _schema() -> dict[str, Any]:
    single = Answer.model_json_schema()
    multi = MultiAnswer.model_json_schema()
    defs = {**single.pop("$defs", {}), **multi.pop("$defs", {})}
    defs["Answer"] = single
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://kb.invalid/schema/query-answer.schema.json",
        "title": "kb query answer",
        "description": "What `kb query --json` prints: one answer, or one row per accelerator without --gpu.",
        "oneOf": [{"$ref": "#/$defs/Answer"}, {"$ref": "#/$defs/MultiAnswer"}],
        "$defs": {**defs, "MultiAnswer": multi},
    }


ANSWER_SCHEMA = _schema()
