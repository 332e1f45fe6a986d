"""One decision per accelerator (issue 43): kernel answers, memory, the engine's pick and pool and the global gates
go in; a `Decision` comes out (verdict, the case that decided it, per-phase status, what blocks it, the memory
state). Nothing here is worded: kbtool/render/verdict.py writes the summary from the Decision, for the text and
the JSON alike, and nothing edits a summary after it is made.

The cases, in the order they bind (the first that holds decides; `CASES` names each one's verdict):

- HARDWARE: a hardware gate holds (vLLM refusing bf16 below sm80): no.
- CTX_OVER_MODEL: --ctx beyond the model's max_position_embeddings: no.
- ENGINE_REFUSES / ENGINE_DEPENDS: the engine's own check raises (no), or needs an input not given (conditional).
- UNMODELLED_MEMORY: the serve line sets a flag that moves GPU memory kb does not model (--cpu-offload-gb, a
  draft model, LoRA): conditional, the flag named, never a confident yes or no from the memory model.
- POOL_EDGE: kb's count lies within its own measured error (the release's boots of the model's class) of the
  boundary of the engine's start-up check: conditional, too close to call either way.
- POOL_REFUSES: the engine's start-up check on its KV pool fails (its own count): no. Under an engine, "fits"
  means this check passes, so a "fits" verdict where the engine refuses to start cannot be made.
- NO_FIT: the KV cache (or the weights) do not fit: no. Not where the engine starts anyway with a pool shorter than
  the context the line leaves to the model (SGLang: a warning, and requests capped to the pool; the pool's
  `short` report): its start decides, and the summary says the cap.
- ENGINE_NOT_RECORDED: the engine release is not recorded: conditional.
- ENGINE_KERNELS_REFUSE: the engine starts a backend whose every kernel is refused (for any reason: head size,
  architecture, KV dtype, sinks, ...) by claims about the build the engine calls, judged on the call it makes
  (kbtool/solve/calls.py): conditional (expect a failure at first use). Where the refusing claims are about no
  build the engine is recorded to call, the engine's answer stands (ENGINE) with a "kernels" caveat naming the
  doubt and the refusing claims. Both read the picked backend's own judgement of its kernels (`runs`), never
  another backend's call of the same kernel.
- ENGINE_FAILS: the engine starts the backend it picks, and a claim verified for this architecture and release
  says it then fails at its first use here (claim effect "fails": fp16 queries into FA-3's fp8 path, which writes
  bf16 only): no, with the claim's workaround. Unverified here, such a claim is an engine caveat (ENGINE,
  conditional).
- DTYPE_UNREAD: the engine starts (ENGINE), but the checkpoint is a quantized one known by its name only, whose
  torch_dtype kb did not read, and asked in fp16 the engine's pick fails at first use (ENGINE_FAILS): conditional,
  the failure named (decided in kbtool/solve/solver.py `_solved`, which asks both).
- ENGINE: the engine starts (yes; conditional with the picked backend's engine caveats or hardware caveats).
- NO_KERNEL_COVERS, REJECTED, DISPUTED, UNKNOWN, DEPENDS, CAVEATS, YES: the kernel layer alone (no engine pick).
"""

from __future__ import annotations

from kbtool.solve.parts import _Plain

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.engines.results import Pick, Pool
    from kbtool.solve.parts import BackendAnswer, KernelAnswer, Memory, Reason

CASES = {
    "HARDWARE": "no", "CTX_OVER_MODEL": "no", "ENGINE_REFUSES": "no", "ENGINE_DEPENDS": "conditional",
    "UNMODELLED_MEMORY": "conditional", "POOL_EDGE": "conditional", "POOL_REFUSES": "no", "NO_FIT": "no",
    "ENGINE_NOT_RECORDED": "conditional",
    "ENGINE_KERNELS_REFUSE": "conditional", "ENGINE_FAILS": "no", "DTYPE_UNREAD": "conditional",
    "ENGINE": "yes", "NO_KERNEL_COVERS": "unknown",
    "REJECTED": "no",
    "DISPUTED": "conditional", "UNKNOWN": "unknown", "DEPENDS": "conditional", "CAVEATS": "conditional",
    "YES": "yes",
}


class Decision(_Plain):
    """How the verdict was reached: the data the summary is worded from."""

    SPEC = {
        "verdict": ({"enum": ["yes", "no", "conditional", "unknown"]}, "yes, no, conditional or unknown"),
        "case": ({"enum": list(CASES)}, "The case that decided it (kbtool/solve/decision.py)"),
        "where": ({"type": "string"}, "The accelerator, with its count under tensor parallel"),
        "phases": ({"type": "object"}, "Best kernel status per requested phase (null: no kernel covers it)"),
        "use": ({"type": "object"}, "Per phase, the first kernel to try"),
        "blocking": ({"type": "array", "items": {"type": "string"}}, "Phases that block (rejected, disputed, "
                                                                      "unknown, not covered), or inputs not given"),
        "caveats": ({"type": "array", "items": {"type": "string"}}, "What makes a yes conditional: engine "
                                                                     "(the picked backend's caveats), hardware"),
        "memory": ({"anyOf": [{"type": "object"}, {"type": "null"}]}, "Memory state: fits, starts (the engine's "
                                                                      "start-up check), kv, available, weights, "
                                                                      "usable, capacity, utilization, max_ctx bytes "
                                                                      "and tokens; null without a model"),
        "detail": ({"type": "object"}, "What the case needs to be worded: the hardware gate's message, ctx and the "
                                       "model's limit, the engine's override, the refused kernels"),
    }
    FIELDS = tuple(SPEC)
    TYPED = ("pick", "pool")  # serialized as the answer's `engine` and `memory.engine_report`
    __slots__ = (*FIELDS, *TYPED)

    def __init__(self, *, case: str, where: str, phases: dict[str, str | None], use: dict[str, str],
                 blocking: list[str], caveats: list[str], memory: dict[str, Any] | None, detail: dict[str, Any],
                 pick: Pick | None, pool: Pool | None) -> None:
        self.verdict = "conditional" if CASES[case] == "yes" and caveats else CASES[case]
        self.case, self.where, self.phases, self.use = case, where, phases, use
        self.blocking, self.caveats, self.memory, self.detail = blocking, caveats, memory, detail
        self.pick, self.pool = pick, pool


def _memory_state(memory: Memory | None, pool: Pool | None, utilization: float) -> dict[str, Any] | None:
    if memory is None:
        return None
    fits = memory.fits
    starts = pool.starts if pool is not None else None
    return {"fits": fits if starts is not False else False, "starts": starts,
            "kv_bytes": memory.kv_bytes, "available_bytes": memory.available_bytes,
            "weights_bytes": memory.weights_bytes, "capacity_bytes": memory.capacity_bytes,
            # the engine's share of the device (vLLM: utilization; SGLang: mem_fraction_static, whose reserve also
            # holds what lies outside that share, so the sum of the parts is not it where the pool is clamped at 0)
            "usable_bytes": int(memory.capacity_bytes * utilization) if memory.capacity_bytes else
            memory.available_bytes + memory.weights_bytes + memory.reserve_bytes,
            "utilization": utilization, "max_ctx": memory.max_ctx,
            "engine": pool.label if pool is not None else None,
            "engine_error": pool.error if pool is not None else None,
            "concurrency": pool.concurrency if pool is not None else None}


def decide(*, where: str, phases: list[str], kernels: list[KernelAnswer], rec: dict[str, list[str]],
           memory: Memory | None, utilization: float, over: tuple[int, int, str] | None, held: list[Reason],
           glob_caveats: list[Reason], pick: Pick | None, backends: list[BackendAnswer],
           long_context: str | None, unmodelled: dict[str, str] | None = None,
           runs: dict[str, list[str]] | None = None) -> Decision:
    """The one verdict for one accelerator (see the module docstring for the cases, in order). `runs`: the picked
    backend's own judgement of each kernel it runs, as its reasons, "CODE (claim)" (solver.picked_refusals): its
    recorded call's outcome here, or the kernel layer's plain one where it records no call. The kernel check reads
    these, never the kernel's answer, which takes the best call of every backend that runs the kernel. Any refusal
    counts, whatever its reason."""
    from kbtool.solve.gates import best

    per_phase: dict[str, str | None] = {
        p: best(k.phase_status[p] for k in kernels if p in k.phase_status)
        if any(p in k.phase_status for k in kernels) else None for p in phases}
    use = {p: ids[0] for p, ids in rec.items() if ids}
    pool = memory.pool if memory is not None else None
    mem = _memory_state(memory, pool, utilization)
    fits = mem["fits"] if mem is not None else None
    detail: dict[str, Any] = {}
    caveats: list[str] = []

    def made(case: str, blocking: list[str] | None = None) -> Decision:
        return Decision(case=case, where=where, phases=per_phase, use=use, blocking=blocking or [],
                        caveats=caveats, memory=mem, detail=detail, pick=pick, pool=pool)

    if held:
        detail["message"] = held[0].message
        return made("HARDWARE")
    if over is not None:
        detail.update(ctx=over[0], limit=over[1], model=over[2], override=long_context)
        return made("CTX_OVER_MODEL")
    if pick is not None and pick.state == "error":
        return made("ENGINE_REFUSES")
    if unmodelled and mem is not None:
        detail["flags"] = dict(unmodelled)
        return made("UNMODELLED_MEMORY")
    if pool is not None and pool.edge is not None:
        detail["edge"] = dict(pool.edge)
        return made("POOL_EDGE")
    if pool is not None and pool.starts is False:
        return made("POOL_REFUSES")
    short = pool.report.get("short") if pool is not None and pool.starts else None
    if fits is False and not short:
        return made("NO_FIT")
    if short:  # the engine starts with a pool shorter than the context it assumed (not asked): it caps requests
        detail["short"] = dict(short)
    if pick is not None and pick.state == "depends":
        return made("ENGINE_DEPENDS")
    if pick is not None and pick.state == "not_recorded":
        return made("ENGINE_NOT_RECORDED")
    if glob_caveats:
        caveats.append("hardware")
    if pick is not None and pick.state == "selected":
        picked = next((b for b in backends if b.id == pick.selected), None)
        if picked is not None:
            fails = [r for r in picked.caveats if r.layer == "engine" and r.fails and not r.handled
                     and r.verification == "verified"]
            if fails:  # verified on this architecture and release: the engine's pick does not serve here
                detail["fails"] = {"claim": fails[0].claim, "message": fails[0].message,
                                   "workaround": fails[0].workaround, "verdict": fails[0].verdict}
                return made("ENGINE_FAILS")
            if any(r.layer == "engine" and not r.handled for r in picked.caveats):
                caveats.insert(0, "engine")
            refused = list(picked.kernels)
            called = {c["kernel"] for c in picked.calls}
            if called:  # its recorded calls say which of its kernels it runs here: only those can fail here
                refused = [k for k in refused if k in called]
            own = runs or {}  # a doubt or a failure is about the kernels this backend calls, as it calls them
            # any refusal counts, not only a head size: architecture, KV dtype, sinks, a window refuse a call too
            refusing = bool(refused) and all(own.get(k) for k in refused)
            if refusing and any(r.code == "KERNELS_REJECTED" for r in picked.reasons):
                detail["kernels"] = refused
                detail["refusals"] = sorted({c for k in refused for c in own[k]})
                # a failure is predicted only where claims about the build the engine calls refuse its call
                scoped = {c["kernel"] for c in picked.calls if c["status"] == "rejected" and c["scoped"]}
                if set(refused) <= scoped:
                    detail["builds"] = sorted({f"{c['build']} {c['version'] or ''}".strip() for c in picked.calls
                                               if c["kernel"] in refused})
                    return made("ENGINE_KERNELS_REFUSE")
                detail["unscoped"] = sorted(set(refused) - scoped)
                caveats.append("kernels")
        return made("ENGINE")
    if not kernels or any(v is None for v in per_phase.values()):
        return made("NO_KERNEL_COVERS", [p for p, v in per_phase.items() if v is None])
    if any(v == "rejected" for v in per_phase.values()):
        return made("REJECTED", [p for p, v in per_phase.items() if v == "rejected"])
    if all(v == "ok" for v in per_phase.values()):
        return made("CAVEATS" if caveats else "YES")
    if all(v in ("ok", "caveat") for v in per_phase.values()):
        return made("CAVEATS")
    if all(v in ("ok", "caveat", "disputed") for v in per_phase.values()):
        return made("DISPUTED", [p for p, v in per_phase.items() if v == "disputed"])
    deps = sorted({d for k in kernels for r in k.reasons + k.caveats for d in r.depends_on})
    if not deps:
        return made("UNKNOWN", [p for p, v in per_phase.items() if v == "unknown"])
    return made("DEPENDS", deps)
