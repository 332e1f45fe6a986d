"""The parts of a query answer (design.md §4): a reason, one kernel's answer, one backend's, the memory block.
kbtool/solve/answer.py composes them into the answer itself; the gates, the engines and the decision build them.

Plain classes, not pydantic: the query path must not pay for importing pydantic (issue #8). Each class
declares its fields once, in SPEC: name -> (JSON Schema of the value, description), in the order they are
serialized; FIELDS and __slots__ follow from it. To add a field: a SPEC row and an __init__ argument.
"""

from __future__ import annotations

from kbtool.solve.engines.results import ByValue

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal

    from kbtool.solve.engines.results import Pool

    KernelStatus = Literal["ok", "caveat", "disputed", "rejected", "unknown"]
else:
    KernelStatus = str


# JSON Schema fragments for SPEC
STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}
BOOL: dict[str, Any] = {"type": "boolean"}
ANY: dict[str, Any] = {}
STRS: dict[str, Any] = {"type": "array", "items": STR}
OBJ: dict[str, Any] = {"type": "object"}
STATUS: dict[str, Any] = {"enum": ["ok", "caveat", "disputed", "rejected", "unknown"]}


def opt(t: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [t, {"type": "null"}]}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/$defs/{name}"}


def many(t: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": t}


def _plain(x: Any) -> Any:
    if isinstance(x, _Plain):
        return x.to_dict()
    if isinstance(x, list | tuple):
        return [_plain(i) for i in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


class _Plain(ByValue):
    __slots__ = ()
    SPEC: dict[str, tuple[dict[str, Any], str]] = {}
    FIELDS: tuple[str, ...] = ()

    def _fields(self) -> tuple[str, ...]:
        return self.FIELDS

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """This class's JSON Schema: every field present (to_dict writes them all), nothing else."""
        return {"type": "object", "description": (cls.__doc__ or cls.__name__).strip().splitlines()[0],
                "properties": {f: {**t, "description": d} for f, (t, d) in cls.SPEC.items()},
                "required": list(cls.SPEC), "additionalProperties": False}

    def to_dict(self) -> dict[str, Any]:
        return {f: _plain(getattr(self, f)) for f in self.FIELDS}


class Reason(_Plain):
    """Why a gate rejects a kernel, leaves it unknown, or adds a caveat."""

    SPEC = {
        "claim": (STR, "Claim id"),
        "code": (STR, "Stable reason code"),
        "message": (STR, "Message with the observed and allowed values filled in"),
        "observed": (ANY, "The query's value of the deciding variable"),
        "allowed": (ANY, "The values that would pass"),
        "verification": ({"enum": ["verified", "unverified", "refuted", "disputed", "untestable", "structural"]},
                         "The claim's verification status; structural: derived from the records' structure "
                         "(phases, layouts, engine wiring), not a claim"),
        "enforced": (BOOL, "False for refuted claims: shown, not enforced"),
        "layer": ({"enum": ["kernel", "engine"]}, "Which layer's gate it is"),
        "depends_on": (STRS, "Inputs not given that decide it"),
        "evidence": (STRS, "Evidence records, for verified claims"),
        "verified_on": (STRS, "Architectures the evidence ran on; a verified or refuted status says nothing "
                              "about other architectures"),
        "sources": (STRS, "Where the claim comes from"),
        "phase": (opt(STR), "The phase it applies to, when not every phase"),
        "subject": (opt(STR), "The record the claim is about"),
        "scope": (opt(STR), "Versions the claim is scoped to"),
        "workaround": (opt(STR), "What to do instead"),
        "verdict": (opt(STR), "Where the claim's verdicts hold, e.g. 'refuted on sm90 (flashinfer 0.6.18)'; the "
                              "status above is the one for this query's environment"),
        "sides": (many(OBJ), "Disputed here: each side's position and its sources"),
        "handled": (opt(STR), "How the engine handles this caveat by default"),
        "fails": (BOOL, "A caveat whose claim says the engine accepts this and fails at its first use (effect "
                        "'fails'): where it is verified here, the engine's pick does not serve"),
    }
    FIELDS = tuple(SPEC)
    __slots__ = FIELDS

    def __init__(self, *, claim: str, code: str, message: str, observed: Any = None, allowed: Any = None,
                 verification: str, enforced: bool = True, layer: str = "kernel",
                 depends_on: list[str] | None = None, evidence: list[str] | None = None,
                 verified_on: list[str] | None = None, sources: list[str] | None = None,
                 phase: str | None = None, subject: str | None = None, scope: str | None = None,
                 workaround: str | None = None, verdict: str | None = None,
                 sides: list[dict[str, Any]] | None = None, handled: str | None = None, fails: bool = False) -> None:
        self.claim, self.code, self.message = claim, code, message
        self.observed, self.allowed, self.verification, self.enforced = observed, allowed, verification, enforced
        self.layer = layer
        self.depends_on = depends_on if depends_on is not None else []
        self.evidence = evidence if evidence is not None else []
        self.verified_on = verified_on if verified_on is not None else []
        self.sources = sources if sources is not None else []
        self.phase, self.subject, self.scope, self.workaround = phase, subject, scope, workaround
        self.verdict, self.sides, self.handled = verdict, sides if sides is not None else [], handled
        self.fails = fails

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
        r.verdict, r.sides, r.handled, r.fails = None, [], None, False
        return r

    def with_phase(self, phase: str | None) -> Reason:
        r = self.without_phase()
        r.phase = phase
        return r

    def without_phase(self) -> Reason:
        r = Reason.__new__(Reason)
        for f in self.FIELDS:
            setattr(r, f, getattr(self, f))
        r.phase = None
        return r


class KernelAnswer(_Plain):
    """A kernel's status for the query, with the reasons."""

    SPEC = {
        "id": (STR, "Kernel id"),
        "status": (STATUS, "ok, caveat, disputed, rejected or unknown (worst over its phases)"),
        "phase_status": ({"type": "object", "additionalProperties": STATUS}, "Status per phase evaluated"),
        "library": (opt(STR), "Library, as used in version scopes"),
        "gates": (INT, "Gate claims (reject/caveat) the KB records for it"),
        "via": (STRS, "Engine backends that reach it (--engine)"),
        "reasons": (many(ref("Reason")), "Gates that reject it or leave it unknown"),
        "caveats": (many(ref("Reason")), "Caveats that apply"),
        "workarounds": (STRS, "What to do instead"),
        "refuted": (many(ref("Reason")), "Refuted gates, not enforced"),
        "rank": (opt(INT), "Rank by measured latency, where measured"),
        "measured": (opt(OBJ), "Measured latency used for ranking"),
    }
    FIELDS = tuple(SPEC)
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

    SPEC = {
        "id": (STR, "Engine-backend id"),
        "backend_name": (STR, "The engine's own name for it"),
        "status": (STATUS, "Worst over phases of: its own gates and its best kernel"),
        "phase_status": ({"type": "object", "additionalProperties": STATUS}, "Status per phase"),
        "kernels": ({"type": "object", "additionalProperties": STATUS}, "Kernel-layer status of its kernels"),
        "reasons": (many(ref("Reason")), "Engine-layer (and kernel-layer) reasons"),
        "caveats": (many(ref("Reason")), "Caveats that apply"),
        "refuted": (many(ref("Reason")), "Refuted gates, not enforced"),
        "engine_status": (STATUS, "The engine's own gates alone (its validation): ok or caveat means it starts "
                                  "this backend; `status` adds kb's kernel layer (its kernels refused, or none "
                                  "recorded: it may start, then fail at first use)"),
        "calls": (many({"type": "object"}), "Its kernels as the engine calls them here, per phase: the build, its "
                                            "version, the call and its shape, judged by the claims about that build "
                                            "(kbtool/solve/calls.py); empty where no call is recorded"),
    }
    FIELDS = tuple(SPEC)
    __slots__ = FIELDS

    def __init__(self, *, id: str, backend_name: str, status: KernelStatus,
                 phase_status: dict[str, KernelStatus] | None = None, kernels: dict[str, KernelStatus] | None = None,
                 reasons: list[Reason] | None = None, caveats: list[Reason] | None = None,
                 refuted: list[Reason] | None = None, engine_status: KernelStatus | None = None,
                 calls: list[dict[str, Any]] | None = None) -> None:
        self.id, self.backend_name, self.status = id, backend_name, status
        self.calls = calls if calls is not None else []
        self.engine_status = engine_status or status
        self.phase_status = phase_status if phase_status is not None else {}
        self.kernels = kernels if kernels is not None else {}
        self.reasons = reasons if reasons is not None else []
        self.caveats = caveats if caveats is not None else []
        self.refuted = refuted if refuted is not None else []


class Memory(_Plain):
    """The KV budget on one GPU, as the engine's accounting sizes it: capacity x its share - weights - reserve = the
    KV pool (available_bytes)."""

    SPEC = {
        "fits": (opt(BOOL), "Whether weights + KV cache fit; null without a model"),
        "kv_bytes": (INT, "KV-cache bytes for the batch at ctx, per GPU"),
        "kv_bytes_per_token": ({"type": "number"}, "KV bytes per token, per GPU"),
        "weights_bytes": (INT, "Weight bytes per GPU"),
        "available_bytes": (INT, "The KV pool: capacity x utilization - weights - reserve, per GPU"),
        "capacity_bytes": (INT, "Device memory used for the calculation (the driver's figure where recorded)"),
        "max_ctx": (INT, "Largest context that fits at this batch, capped at the model's max_position_embeddings"),
        "formula": (STR, "The formula with the numbers filled in"),
        "notes": (STRS, "Assumptions"),
        "weights_dtype": (opt(STR), "Weight format the weights are sized at"),
        "reserve_bytes": (INT, "Activation and CUDA-graph reserve per GPU"),
        "utilization": ({"type": "number"}, "gpu-memory-utilization"),
        "pool_tokens": (INT, "Tokens the KV pool holds (layers that grow with the context)"),
        "max_sequences": (opt(INT), "Sequences of the asked ctx that fit at once"),
        "max_ctx_memory": (INT, "Largest context memory allows, before the model's cap"),
        "ctx_limit": ({"enum": ["memory", "model"]}, "What binds max_ctx: memory or the model's limit"),
        "gpus_to_fit": (opt(INT), "Fewest GPUs (doubling --gpus, up to 64) that fit; null if it fits or none does"),
        "engine_report": (opt(OBJ), "What the engine whose accounting sized this pool will print at start-up, in "
                                    "its own terms: `text` its log lines, its pool in tokens and blocks, the "
                                    "concurrency at the asked length, `accounting` the release whose accounting "
                                    "was used, the pools left out, `error` its start-up error; basis 'measured' "
                                    "(a recorded boot of the same model, GPU, flags and release, cited) or "
                                    "'estimated' (`error`: kb against the recorded boots of the model's class)"),
        "to_fit": ({"type": "array", "items": OBJ},
                   "When it does not fit: each change that makes it fit, sized again with the same budget before it "
                   "is offered ({change: the query option(s), max_sequences, max_ctx}); empty when nothing kb can "
                   "change fits or when it fits"),
    }
    FIELDS = tuple(SPEC)
    TYPED = ("pool",)  # engine_report, typed (kbtool/solve/engines/results.py Pool); not serialized twice
    __slots__ = (*FIELDS, *TYPED)

    def __init__(self, *, fits: bool | None, kv_bytes: int, kv_bytes_per_token: float = 0, weights_bytes: int,
                 available_bytes: int, capacity_bytes: int = 0, max_ctx: int, formula: str,
                 notes: list[str] | None = None, weights_dtype: str | None = None, reserve_bytes: int = 0,
                 utilization: float = 0.9, pool_tokens: int = 0, max_sequences: int | None = None,
                 max_ctx_memory: int = 0, ctx_limit: str = "memory", gpus_to_fit: int | None = None,
                 to_fit: list[dict[str, Any]] | None = None, engine_report: dict[str, Any] | None = None) -> None:
        self.fits, self.kv_bytes, self.kv_bytes_per_token = fits, kv_bytes, kv_bytes_per_token
        self.weights_bytes, self.available_bytes, self.capacity_bytes = weights_bytes, available_bytes, capacity_bytes
        self.max_ctx, self.formula = max_ctx, formula
        self.notes = notes if notes is not None else []
        self.weights_dtype, self.reserve_bytes, self.utilization = weights_dtype, reserve_bytes, utilization
        self.pool_tokens, self.max_sequences = pool_tokens, max_sequences
        self.max_ctx_memory, self.ctx_limit, self.gpus_to_fit = max_ctx_memory, ctx_limit, gpus_to_fit
        self.engine_report = engine_report
        self.to_fit = to_fit if to_fit is not None else []
        self.pool: Pool | None = None  # the engine's own accounting (kbtool/solve/engines/results.py), typed
