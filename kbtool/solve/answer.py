"""The shape of a query answer (design.md §4): the one model. `--json` prints `to_dict()` of these objects,
and schema/query-answer.schema.json is generated from them (`json_schema`, `kb schema export`). The parts (reasons,
kernel and backend answers, memory) are in kbtool/solve/parts.py; the same rules hold: plain classes, each field
declared once, in SPEC.
"""

from __future__ import annotations

from kbtool.solve.parts import OBJ, STR, STRS, BackendAnswer, KernelAnswer, Memory, Reason, _Plain, many, opt, ref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.decision import Decision


class Answer(_Plain):
    """One accelerator's answer: verdict, kernels, memory, caveats."""

    SPEC = {
        "query": (OBJ, "The normalized inputs"),
        "verdict": ({"enum": ["yes", "no", "conditional", "unknown"]}, "yes, no, conditional or unknown"),
        "summary": (STR, "One sentence"),
        "kernels": (many(ref("KernelAnswer")), "Every candidate kernel with its status"),
        "memory": (opt(ref("Memory")), "KV fit; null when no model or no GPU was given"),
        "claims_used": (STRS, "Claims that were evaluated"),
        "depends_on": (STRS, "Inputs that would decide unknowns"),
        "backends": (many(ref("BackendAnswer")), "Engine backends (with --engine)"),
        "caveats": (many(ref("Reason")), "Caveats about the accelerator itself"),
        "assumed": (OBJ, "Defaults used for inputs not given"),
        "notes": (STRS, "Other remarks"),
        "ranking": (opt(OBJ), "Measurement-based ranking, if any"),
        "recommended": ({"type": "object", "additionalProperties": STRS},
                        "Per phase, the kernels to use in the order to try"),
        "engine": (opt(OBJ), "With --engine: the engine's pick (kbtool/solve/engines/results.py Pick): engine, label, "
                             "release, state (selected, error, not_recorded, depends), the selected backend, what "
                             "runs prefill and decode, page size and what forced it, the refusals ahead of its "
                             "choice, its error, then the engine's own data (its priority list with every "
                             "refusal, MLA paths, resolved settings, what it prints at start-up); null otherwise"),
        "decision": (opt(OBJ), "How the verdict was reached (kbtool/solve/decision.py): the deciding case, per-phase "
                               "status, what blocks it, the memory state; the summary is worded from it"),
    }
    FIELDS = tuple(SPEC)
    __slots__ = FIELDS

    def __init__(self, *, query: dict[str, Any], verdict: str, summary: str, kernels: list[KernelAnswer],
                 memory: Memory | None, claims_used: list[str], depends_on: list[str] | None = None,
                 backends: list[BackendAnswer] | None = None, caveats: list[Reason] | None = None,
                 assumed: dict[str, Any] | None = None, notes: list[str] | None = None,
                 ranking: dict[str, Any] | None = None, recommended: dict[str, list[str]] | None = None,
                 engine: dict[str, Any] | None = None, decision: Decision | None = None) -> None:
        self.query, self.verdict, self.summary, self.kernels = query, verdict, summary, kernels
        self.engine = engine  # with --engine: the engine's Pick as data (kbtool/solve/engines/results.py)
        self.decision = decision  # how the verdict was reached; kbtool/render/verdict.py words `summary` from it
        self.memory, self.claims_used = memory, claims_used
        self.depends_on = depends_on if depends_on is not None else []
        self.backends = backends if backends is not None else []
        self.caveats = caveats if caveats is not None else []
        self.assumed = assumed if assumed is not None else {}
        self.notes = notes if notes is not None else []
        self.ranking = ranking
        self.recommended = recommended if recommended is not None else {}


class MultiAnswer(_Plain):
    """Without --gpu: one answer per accelerator."""

    SPEC = {
        "query": (OBJ, "The normalized inputs"),
        "rows": (many(ref("Answer")), "One answer per accelerator"),
        "verdict": (opt({"enum": ["yes", "no", "conditional", "unknown"]}),
                    "The verdict every row gives, where they all give the same one (a line that fails, or starts, "
                    "whatever the GPU); null where the rows differ: the answer depends on the GPU"),
        "summary": (STR, "One sentence over all rows"),
    }
    FIELDS = tuple(SPEC)
    __slots__ = FIELDS

    def __init__(self, *, query: dict[str, Any], rows: list[Answer], summary: str = "") -> None:
        self.query, self.rows, self.summary = query, rows, summary
        shared = {r.verdict for r in rows}
        self.verdict = shared.pop() if len(shared) == 1 else None


class EngineComparison(_Plain):
    """With --engine vllm,sglang: one answer per engine for the same question, and where they differ."""

    SPEC = {
        "query": (OBJ, "The inputs common to every engine"),
        "answers": (many(ref("Answer")), "One answer per engine, in the order asked"),
        "digest": ({"type": "array", "items": OBJ}, "Per engine: engine, label, verdict, prefill, decode, "
                                                    "page_size (its paged-KV block), pool_tokens (what its "
                                                    "start-up reports), error"),
        "differences": (STRS, "Where the engines differ, one sentence each (backend, page size, pool tokens, "
                              "verdict)"),
    }
    FIELDS = tuple(SPEC)
    __slots__ = FIELDS

    def __init__(self, *, query: dict[str, Any], answers: list[Answer], digest: list[dict[str, Any]],
                 differences: list[str]) -> None:
        self.query, self.answers, self.digest, self.differences = query, answers, digest, differences

    @property
    def rows(self) -> list[Answer]:
        return self.answers


def to_json(answer: Answer | MultiAnswer | EngineComparison) -> str:
    """The answer as `--json` prints it (2-space indent, UTF-8 kept)."""
    import json

    return json.dumps(answer.to_dict(), indent=2, ensure_ascii=False)


def json_schema() -> dict[str, Any]:
    """schema/query-answer.schema.json: one answer, or one row per accelerator without --gpu."""
    classes = (Reason, KernelAnswer, BackendAnswer, Memory, Answer, MultiAnswer, EngineComparison)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://kb.invalid/schema/query-answer.schema.json",
        "title": "kb query answer",
        "description": "What `kb query --json` prints: one answer, one row per accelerator without --gpu, or one "
                       "answer per engine with several engines (--engine A,B).",
        "oneOf": [ref("Answer"), ref("MultiAnswer"), ref("EngineComparison")],
        "$defs": {c.__name__: c.json_schema() for c in classes},
    }
