"""The shape of a query answer (design.md §4). `--json` prints `to_dict()` of exactly these objects.

Plain classes, not pydantic: the query path must not pay for importing pydantic (issue #8). Their JSON
Schema comes from pydantic mirrors in kbtool/answer_schema.py; tests/solve/test_answer.py checks that the
fields (names and order) of the two agree, and the golden tests validate real answers against the schema.
Each class lists its fields in FIELDS, in the order they are serialized.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal

    Verdict = Literal["yes", "no", "conditional", "unknown"]
    KernelStatus = Literal["ok", "caveat", "rejected", "unknown"]
else:
    Verdict = KernelStatus = str


def _plain(x: Any) -> Any:
    if isinstance(x, _Plain):
        return x.to_dict()
    if isinstance(x, list | tuple):
        return [_plain(i) for i in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


class _Plain:
    __slots__ = ()
    FIELDS: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {f: _plain(getattr(self, f)) for f in self.FIELDS}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, f) == getattr(other, f) for f in self.FIELDS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self.FIELDS)})"


class Reason(_Plain):
    """Why a gate rejects a kernel, leaves it unknown, or adds a caveat."""

    FIELDS = ("claim", "code", "message", "observed", "allowed", "verification", "enforced", "layer",
              "depends_on", "evidence", "verified_on", "sources", "phase", "subject", "scope", "workaround")
    __slots__ = FIELDS

    def __init__(self, *, claim: str, code: str, message: str, observed: Any = None, allowed: Any = None,
                 verification: str, enforced: bool = True, layer: str = "kernel",
                 depends_on: list[str] | None = None, evidence: list[str] | None = None,
                 verified_on: list[str] | None = None, sources: list[str] | None = None,
                 phase: str | None = None, subject: str | None = None, scope: str | None = None,
                 workaround: str | None = None) -> None:
        self.claim, self.code, self.message = claim, code, message
        self.observed, self.allowed, self.verification, self.enforced = observed, allowed, verification, enforced
        self.layer = layer
        self.depends_on = depends_on if depends_on is not None else []
        self.evidence = evidence if evidence is not None else []
        self.verified_on = verified_on if verified_on is not None else []
        self.sources = sources if sources is not None else []
        self.phase, self.subject, self.scope, self.workaround = phase, subject, scope, workaround

    @classmethod
    def of_claim(cls, claim: str, code: str, message: str, observed: Any, allowed: Any, verification: str,
                 layer: str, depends_on: list[str], evidence: list[str], sources: list[str], phase: str | None,
                 subject: str | None, scope: str | None, workaround: str | None) -> Reason:
        """A claim's reason, built positionally (the solver makes thousands; keyword parsing shows)."""
        r = object.__new__(cls)
        r.claim, r.code, r.message, r.observed, r.allowed = claim, code, message, observed, allowed
        r.verification, r.enforced, r.layer = verification, verification != "refuted", layer
        r.depends_on, r.evidence, r.verified_on, r.sources = depends_on, evidence, [], sources
        r.phase, r.subject, r.scope, r.workaround = phase, subject, scope, workaround
        return r

    def without_phase(self) -> Reason:
        r = Reason.__new__(Reason)
        for f in self.FIELDS:
            setattr(r, f, getattr(self, f))
        r.phase = None
        return r


class KernelAnswer(_Plain):
    FIELDS = ("id", "status", "phase_status", "library", "gates", "via", "reasons", "caveats", "workarounds",
              "refuted", "rank", "measured")
    __slots__ = FIELDS

    def __init__(self, *, id: str, status: KernelStatus, phase_status: dict[str, KernelStatus] | None = None,
                 library: str | None = None, gates: int = 0, via: list[str] | None = None,
                 reasons: list[Reason] | None = None, caveats: list[Reason] | None = None,
                 workarounds: list[str] | None = None, refuted: list[Reason] | None = None,
                 rank: int | None = None, measured: dict[str, Any] | None = None) -> None:
        self.id, self.status, self.library, self.gates = id, status, library, gates
        self.phase_status = phase_status if phase_status is not None else {}
        self.via = via if via is not None else []
        self.reasons = reasons if reasons is not None else []
        self.caveats = caveats if caveats is not None else []
        self.workarounds = workarounds if workarounds is not None else []
        self.refuted = refuted if refuted is not None else []
        self.rank, self.measured = rank, measured


def kernel_answer(id: str, status: KernelStatus, phase_status: dict[str, KernelStatus], library: str | None,
                  gates: int, via: list[str], reasons: list[Reason], caveats: list[Reason], workarounds: list[str],
                  refuted: list[Reason]) -> KernelAnswer:
    """A KernelAnswer built positionally, unranked (the solver makes one per kernel)."""
    k = object.__new__(KernelAnswer)
    k.id, k.status, k.phase_status, k.library, k.gates, k.via = id, status, phase_status, library, gates, via
    k.reasons, k.caveats, k.workarounds, k.refuted = reasons, caveats, workarounds, refuted
    k.rank = k.measured = None
    return k


class BackendAnswer(_Plain):
    """An engine backend (with --engine): its own gates and the kernels it reaches."""

    FIELDS = ("id", "backend_name", "status", "phase_status", "kernels", "reasons", "caveats", "refuted")
    __slots__ = FIELDS

    def __init__(self, *, id: str, backend_name: str, status: KernelStatus,
                 phase_status: dict[str, KernelStatus] | None = None, kernels: dict[str, KernelStatus] | None = None,
                 reasons: list[Reason] | None = None, caveats: list[Reason] | None = None,
                 refuted: list[Reason] | None = None) -> None:
        self.id, self.backend_name, self.status = id, backend_name, status
        self.phase_status = phase_status if phase_status is not None else {}
        self.kernels = kernels if kernels is not None else {}
        self.reasons = reasons if reasons is not None else []
        self.caveats = caveats if caveats is not None else []
        self.refuted = refuted if refuted is not None else []


class Memory(_Plain):
    FIELDS = ("fits", "kv_bytes", "kv_bytes_per_token", "weights_bytes", "available_bytes", "capacity_bytes",
              "max_ctx", "formula", "notes")
    __slots__ = FIELDS

    def __init__(self, *, fits: bool | None, kv_bytes: int, kv_bytes_per_token: float = 0, weights_bytes: int,
                 available_bytes: int, capacity_bytes: int = 0, max_ctx: int, formula: str,
                 notes: list[str] | None = None) -> None:
        self.fits, self.kv_bytes, self.kv_bytes_per_token = fits, kv_bytes, kv_bytes_per_token
        self.weights_bytes, self.available_bytes, self.capacity_bytes = weights_bytes, available_bytes, capacity_bytes
        self.max_ctx, self.formula = max_ctx, formula
        self.notes = notes if notes is not None else []


class Answer(_Plain):
    FIELDS = ("query", "verdict", "summary", "kernels", "memory", "claims_used", "depends_on", "backends",
              "caveats", "assumed", "notes", "ranking", "engine")
    __slots__ = FIELDS

    def __init__(self, *, query: dict[str, Any], verdict: str, summary: str, kernels: list[KernelAnswer],
                 memory: Memory | None, claims_used: list[str], depends_on: list[str] | None = None,
                 backends: list[BackendAnswer] | None = None, caveats: list[Reason] | None = None,
                 assumed: dict[str, Any] | None = None, notes: list[str] | None = None,
                 ranking: dict[str, Any] | None = None, engine: dict[str, Any] | None = None) -> None:
        self.query, self.verdict, self.summary, self.kernels = query, verdict, summary, kernels
        self.engine = engine  # with --engine vllm: vLLM's own selection (kbtool/solve/engine.py)
        self.memory, self.claims_used = memory, claims_used
        self.depends_on = depends_on if depends_on is not None else []
        self.backends = backends if backends is not None else []
        self.caveats = caveats if caveats is not None else []
        self.assumed = assumed if assumed is not None else {}
        self.notes = notes if notes is not None else []
        self.ranking = ranking


class MultiAnswer(_Plain):
    """Without --gpu: one answer per accelerator."""

    FIELDS = ("query", "rows", "summary")
    __slots__ = FIELDS

    def __init__(self, *, query: dict[str, Any], rows: list[Answer], summary: str = "") -> None:
        self.query, self.rows, self.summary = query, rows, summary


def to_json(answer: Answer | MultiAnswer) -> str:
    """The answer as `--json` prints it (2-space indent, UTF-8 kept)."""
    import json

    return json.dumps(answer.to_dict(), indent=2, ensure_ascii=False)
