"""The query solver: inputs -> an Answer per accelerator (design.md §4).

Per accelerator and requested phase, every kernel's claims (and, with --engine, its engine backends' claims)
are applied in a three-valued environment built from the query, the accelerator and the model. The solver
reads the query image (kbtool/solve/image.py), never record models, so `kb query` does not import pydantic.
"""

from __future__ import annotations

from kbtool.errors import UsageError
from kbtool.names import resolve_name
from kbtool.solve.answer import Answer, MultiAnswer
from kbtool.solve.context import Ctx, ctx_over_model
from kbtool.solve.decision import CASES, Decision, decide
from kbtool.solve.engines import registry as engines
from kbtool.solve.environment import MLA_LAYOUTS, MLA_ONLY, backend_layout, base_env, phase_env
from kbtool.solve.gates import (
    SEVERITY,
    Judge,
    Outcome,
    apply_claims,
    apply_claims_phases,
    best,
    status_here,
    structural,
    worst,
)
from kbtool.solve.image import Image
from kbtool.solve.parts import BackendAnswer, KernelAnswer, Reason, kernel_answer
from kbtool.solve.query import Query, check_libs
from kbtool.solve.ranking import measured_ranking
from kbtool.solve.request import reread

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.kb import KB
    from kbtool.solve.engines.results import Pick
    from kbtool.solve.image import AcceleratorV, ClaimV, KernelV, ModelV
    from kbtool.solve.parts import KernelStatus, Memory

STATUS_OF: dict[int, KernelStatus] = {0: "ok", 1: "caveat", 2: "disputed", 3: "unknown", 4: "rejected"}
# derived variables the user cannot give: an answer that depends on one names the inputs behind it
DERIVED_FROM = {"score_matrix_fits": ["num_heads", "ctx"], "score_matrix_bytes": ["num_heads", "ctx"],
                "memory_left_bytes": ["model"], "kv_dtype_differs": ["dtype", "kv_dtype"]}
GIVE = {"num_heads": "--model", "model": "--model", "ctx": "--ctx"}
FLAGS = {"accelerator": "--gpu", "model": "--model", "kernel": "--kernel"}


def _lineage(img: Image, k: KernelV) -> list[str]:
    """The kernel and the families it is a variant of (claims on a family apply to its variants)."""
    out, cur, seen = [k.id], k, {k.id}
    while cur.variant_of and cur.variant_of not in seen:
        seen.add(cur.variant_of)
        out.append(cur.variant_of)
        nxt = img.kernel_by_id.get(cur.variant_of)
        if nxt is None:
            break
        cur = nxt
    return out


def resolve(img: Image | KB, name: str, kind: str) -> str:
    """The id `name` (an id or alias, any case) names; a miss names the three nearest record ids."""
    flag = FLAGS.get(kind, kind)
    if isinstance(img, Image):
        return img.resolve(name, kind, flag)
    by_id = img.by_id
    pool = {a: i for a, i in img.aliases.items() if i in by_id and by_id[i].kind == kind}
    return resolve_name(pool, name, kind, flag)


def prepare(img: Image, q: Query) -> Ctx:
    eng = engines.get(q.engine) if q.engine != "none" and q.built is not None else None
    if eng is not None:  # a pasted line, read again as the release pinned from the records reads it
        eng.pin_release(img, q)
        reread(q, eng.line_reader(q.release))
    model: ModelV | None = None
    if q.model:
        q.model = resolve(img, q.model, "model")
        model = img.model(q.model)
    kernels = img.kernels
    if q.kernels:
        q.kernels = [resolve(img, k, "kernel") for k in q.kernels]
        kernels = [k for k in kernels if k.id in q.kernels]
    cx = Ctx(img, q, model, kernels)
    if q.kernels and set(q.phases) == {"prefill", "decode"}:  # no --phase: the phases the kernels asked serve
        served = {p for k in kernels for p in k.phases}
        if served and len(served) < len(q.phases):
            q.phases = [p for p in q.phases if p in served]
            cx.phase_note = f"{' and '.join(q.phases)} ({', '.join(k.id for k in kernels)} serves only that)"
    check_libs(q.libs, set(img.libraries))
    if q.engine != "none":
        cx.backends = img.backends(q.engine)
        if not cx.backends:
            raise UsageError(f"--engine {q.engine}: the KB has no engine-backend records for it",
                             fix="use --engine none")
        eng = engines.get(q.engine)
        if eng is not None:  # one release's gates apply
            eng.pin_release(img, q)
    return cx


def _merge(reasons: list[Reason]) -> list[Reason]:
    """One reason per (claim, code, message); drop the phase when it appeared in more than one."""
    if len(reasons) < 2:
        return list(reasons)
    seen: dict[tuple[str, str, str, str], Reason] = {}
    for r in reasons:
        key = (r.claim, r.code, r.message.replace(f"{r.phase}", "") if r.phase else r.message, r.layer)
        if key in seen:
            if seen[key].phase != r.phase:
                seen[key] = seen[key].without_phase()
        else:
            seen[key] = r
    return list(seen.values())


def _global_claims(cx: Ctx, acc: AcceleratorV) -> list[ClaimV]:
    subjects = [acc.id] + ([acc.architecture] if acc.architecture in cx.img.cc else [])
    return [c for s in subjects for c in cx.img.claims(s)]


def eval_kernel(cx: Ctx, k: KernelV, envs: dict[str, dict[str, Any]], glob: list[ClaimV]) -> tuple[
        dict[str, KernelStatus], Outcome]:
    claims_of = cx.img.claims
    own = claims_of(k.id) if not k.variant_of else [c for s in _lineage(cx.img, k) for c in claims_of(s)]
    cx.gate_counts[k.id] = sum(c.effect != "supports" for c in own)
    claims = [*own, *glob] if glob else own
    statuses: dict[str, KernelStatus] = {}
    phases = [p for p in envs if p in k.phases]
    out = Outcome()
    if not phases:
        out.status = "rejected"
        out.reasons.append(structural("PHASE", f"{k.id} serves {', '.join(k.phases)} only; asked for "
                                      f"{', '.join(envs)}", observed=list(envs), allowed=list(k.phases),
                                      subject=k.id))
        return statuses, out
    per_phase = apply_claims_phases(claims, [cx.judges[p] for p in phases], cx.differ) if len(phases) > 1 \
        else [apply_claims(claims, cx.judges[phases[0]])]
    lay = envs[phases[0]].get("attention")  # the same in every phase
    layout: Outcome | None = None
    if lay is None and MLA_ONLY.issuperset(k.attention):
        layout = Outcome(status="unknown", reasons=[structural(
            "ATTENTION", f"{k.id} implements {', '.join(k.attention)} attention only [depends on attention: "
            f"give --model]", allowed=list(k.attention), depends=["attention"], subject=k.id)])
    elif lay is not None and lay not in k.attention:
        layout = Outcome(status="rejected", reasons=[structural(
            "ATTENTION", f"{k.id} implements {', '.join(k.attention)} attention; the model uses {lay}",
            observed=lay, allowed=list(k.attention), subject=k.id)])
    worst_seen = 0
    for i, (p, claimed) in enumerate(zip(phases, per_phase, strict=True)):
        if layout is not None:  # the same reason in every phase: the merge keeps one
            o = Outcome(layout.status, list(layout.reasons))
            o.add(claimed)
        else:
            o = claimed
        statuses[p] = o.status
        worst_seen = max(worst_seen, SEVERITY[o.status])
        if i == 0:
            out = o  # the first phase's outcome becomes the kernel's; later phases are appended to it
        else:
            out.add(o)
    out.status = STATUS_OF[worst_seen]
    _knowledge(cx, k, own, envs, phases, statuses, out)
    return statuses, out


def _knowledge(cx: Ctx, k: KernelV, own: list[ClaimV], envs: dict[str, dict[str, Any]], phases: list[str],
               statuses: dict[str, KernelStatus], out: Outcome) -> None:
    """`ok` needs knowledge: an axis the query fixes that no claim about the kernel reads leaves it unknown."""
    from kbtool.solve.axes import fixed_axes, known_axes

    gates = known_axes((v for c in own if c.effect != "supports" for v in c.reads), k.attention)
    missing: list[str] = []
    for p in phases:
        if SEVERITY[statuses[p]] >= SEVERITY["unknown"]:
            continue
        j = cx.judges[p]  # a `supports` statement is knowledge where its condition is not false
        known = gates | known_axes(v for c in own if c.effect == "supports" and j.ev(c.when) is not False
                                   and j.ev(c.requires) is not False for v in c.reads)
        gap = [a for a in fixed_axes(envs[p]) if a not in known]
        if gap:
            statuses[p] = "unknown"
            missing += [a for a in gap if a not in missing]
    if missing:
        out.reasons += [structural("NO_KNOWLEDGE", f"the KB records nothing about {a} for {k.id}", subject=k.id,
                                   depends=[]) for a in missing]
        out.status = worst(statuses.values())


def _gates(cx: Ctx, k: KernelV) -> int:
    n = cx.gate_counts.get(k.id)
    if n is not None:
        return n
    return sum(c.effect != "supports" for s in _lineage(cx.img, k) for c in cx.img.claims(s))


def _kernel_answer(k: KernelV, statuses: dict[str, KernelStatus], o: Outcome, via: list[str],
                   gates: int) -> KernelAnswer:
    if not (o.reasons or o.caveats or o.refuted):  # passes every gate
        return kernel_answer(k.id, o.status, statuses, k.library, gates, via, [], [], [], [])
    reasons, caveats = _merge(o.reasons), _merge(o.caveats)
    ws = [r.workaround for r in reasons + caveats if r.workaround]
    return kernel_answer(k.id, o.status, statuses, k.library, gates, via, reasons, caveats,
                         list(dict.fromkeys(ws)) if ws else [], _merge(o.refuted))


PLATFORM = {"nvidia": "cuda", "amd": "rocm"}  # the accelerator's vendor -> the device platform engines name


def engine_layer(cx: Ctx, envs: dict[str, dict[str, Any]],
                 kstat: dict[str, tuple[dict[str, KernelStatus], Outcome]],
                 glob: list[ClaimV] | None = None,
                 ) -> tuple[list[BackendAnswer], dict[str, list[str]], dict[str, dict[str, Outcome]]]:
    """Evaluate each backend's own gates; return backend answers, kernel -> backends, backend -> phase outcomes."""
    answers: list[BackendAnswer] = []
    via: dict[str, list[str]] = {}
    per_phase: dict[str, dict[str, Outcome]] = {}
    eng = engines.get(cx.q.engine)
    from kbtool.solve.calls import backend_kernels

    kernels = {k.id: k for k in cx.kernels}
    phases_of = {k.id: list(k.phases) for k in cx.kernels}
    glob = glob or []

    def claims_for(kid: str) -> list[ClaimV]:
        k = kernels[kid]
        own = cx.img.claims(k.id) if not k.variant_of else [c for s in _lineage(cx.img, k) for c in cx.img.claims(s)]
        return [*own, *glob]

    cx.called = {}
    for b in cx.backends:
        phases: dict[str, Outcome] = {}
        checked = False  # the engine judged this backend itself (SGLang's resolution)
        for p, env in envs.items():
            lay = backend_layout(env)
            o = Outcome()
            if lay is None and not set(b.attention) - set(MLA_LAYOUTS):
                o = Outcome(status="unknown", reasons=[structural(
                    "ATTENTION", f"{b.id} serves {', '.join(b.attention)} only [depends on attention: give --model]",
                    "engine", allowed=list(b.attention), depends=["attention"], subject=b.id)])
            elif b.platforms and PLATFORM.get(env.get("vendor") or "", "") not in b.platforms:
                o = Outcome(status="rejected", reasons=[structural(
                    "PLATFORM", f"{b.id} runs on {', '.join(b.platforms)} only; {env.get('gpu')} is "
                    f"{PLATFORM.get(env.get('vendor') or '', env.get('vendor'))}", "engine", observed=env.get("vendor"),
                    allowed=list(b.platforms), subject=b.id)])
            elif lay is not None and lay not in b.attention:
                o = Outcome(status="rejected", reasons=[structural(
                    "ATTENTION", f"{b.id} serves {', '.join(b.attention)}; the model uses {lay}", "engine",
                    observed=lay, allowed=list(b.attention), subject=b.id)])
            own = eng.backend_outcome(cx, b, env) if eng is not None else None  # the engine's own checks
            checked = checked or own is not None
            o.add(own if own is not None else apply_claims(cx.img.claims(b.id), cx.judges[p], "engine"))
            phases[p] = o
        per_phase[b.id] = phases
        bk = backend_kernels(b, envs, kstat, phases_of, claims_for, cx.q.engine)
        cx.called[b.id] = bk
        kernel_status = bk.status
        own = Outcome()
        for o in phases.values():
            own.add(o)
        status = own.status
        reasons = list(own.reasons)
        if kernel_status:
            kbest = best(kernel_status.values())  # type: ignore[arg-type]
            if SEVERITY[kbest] > SEVERITY[status]:
                status = kbest
            if kbest == "rejected":
                reasons.append(structural("KERNELS_REJECTED", f"every kernel {b.id} runs is rejected: "
                                          f"{', '.join(kernel_status)}", "engine", subject=b.id))
            for k in kernel_status:  # the call's own caveats: claims about other builds, the build's caveats
                for o in bk.outcomes.get(k, {}).values():
                    own.caveats += o.caveats
        elif checked and not b.kernels and status != "rejected":  # it starts; what it runs has no kernel record
            status = "caveat" if status == "ok" else status
            own.caveats.append(structural("NO_KERNEL_RECORD", f"{b.id} starts, but kb has no kernel record of what "
                                          "it runs: its kernels' own limits are not checked", "engine", subject=b.id))
        else:
            status = "rejected"
            reasons.append(structural("NO_KERNEL", f"{b.id} runs none of the candidate kernels", "engine",
                                      subject=b.id))
        for k in b.kernels:
            via.setdefault(k, []).append(b.id)
        answers.append(BackendAnswer(
            id=b.id, backend_name=b.backend_name, status=status,
            phase_status={p: o.status for p, o in phases.items()}, kernels=kernel_status,  # type: ignore[arg-type]
            reasons=_merge(reasons), caveats=_merge(own.caveats), refuted=_merge(own.refuted),
            engine_status=own.status, calls=[c.to_dict() for c in bk.called]))
    return answers, via, per_phase


def solve_one(cx: Ctx, acc: AcceleratorV) -> Answer:
    q = cx.q
    eng = engines.get(q.engine)
    cx.notes = []
    env, assumed = base_env(cx, acc)
    memory = _memory(cx, acc, env, assumed)  # once per accelerator: the workspace gate and the verdict read it
    cx.memory_left = _memory_left(cx, acc, memory)
    envs = {p: phase_env(cx, env, p) for p in q.phases}
    from kbtool.solve.profile import CHOSEN

    choose = CHOSEN if q.assume == "typical" and "block_size" not in env else frozenset()
    cx.judges = {p: Judge(e, q.libs, choose) for p, e in envs.items()}
    keys = {k for e in envs.values() for k in e}
    cx.differ = {k for k in keys if len({repr(e.get(k)) for e in envs.values()}) > 1}
    glob = _global_claims(cx, acc)
    glob_out = Outcome()
    for p in q.phases:
        glob_out.add(apply_claims(glob, cx.judges[p]))
    glob_rejects = [c for c in glob if c.effect == "reject"]  # hardware gates bind every kernel
    kstat = {k.id: eval_kernel(cx, k, envs, glob_rejects) for k in cx.kernels}
    used: set[str] = set().union(*(o.used for _, o in kstat.values()))
    backends: list[BackendAnswer] = []
    kernels: list[KernelAnswer] = []
    if cx.backends:
        backends, via, per_phase = engine_layer(cx, envs, kstat, glob_rejects)
        for per in per_phase.values():
            for o in per.values():
                used |= o.used
        for k in cx.kernels:
            statuses, o = kstat[k.id]
            bs = via.get(k.id, [])
            combined = Outcome(status=o.status, reasons=list(o.reasons), caveats=list(o.caveats),
                               refuted=list(o.refuted))
            if not bs:
                combined.status = "rejected"
                statuses = {p: "rejected" for p in statuses}
                combined.reasons.append(structural("NOT_IN_ENGINE", f"no {q.engine} backend runs {k.id}", "engine",
                                                   subject=k.id))
            else:
                new: dict[str, KernelStatus] = {}
                statuses = _as_called(cx, k.id, bs, statuses, combined)
                for p, s in statuses.items():
                    bbest = best(per_phase[b][p].status for b in bs)
                    new[p] = worst([s, bbest])
                    for b in bs:
                        bo = per_phase[b][p]
                        if bo.status == bbest:
                            combined.caveats += bo.caveats
                            if bbest != "ok":
                                combined.reasons += bo.reasons
                        combined.refuted += bo.refuted
                statuses = new
                combined.status = worst(statuses.values()) if statuses else o.status
            kernels.append(_kernel_answer(k, statuses, combined, bs, _gates(cx, k)))
    else:
        counts = cx.gate_counts
        kernels = [_kernel_answer(k, s, o, [], counts[k.id]) for k in cx.kernels for s, o in [kstat[k.id]]]
    _handled(cx, kernels, backends)
    chosen = {s: c for j in cx.judges.values() for s, c in j.chosen.items()}
    for subject, passes in sorted(chosen.items()):
        assumed[f"block_size ({subject})"] = " and ".join(dict.fromkeys(passes)) + " (what it needs)"
    _derived_depends(kernels, env)
    ranking = measured_ranking(cx.img, acc.id, q.phases, envs, kernels)
    kernels.sort(key=lambda a: (SEVERITY[a.status], a.gates == 0, a.rank or 10**6, a.id))
    from kbtool.solve.order import engine_ranks, recommended

    erank = engine_ranks(backends, eng.priority(cx, env)) if backends and eng is not None else {}
    rec = recommended(kernels, q.phases, erank, env.get("sm"))
    order = {kid: i for p in q.phases for i, kid in enumerate(rec[p])}
    kernels.sort(key=lambda a: (SEVERITY[a.status], order.get(a.id, 10**6), a.gates == 0, a.id))
    used |= glob_out.used
    glob_caveats = _merge(glob_out.caveats)
    pick = eng.pick(cx, acc, envs, assumed, memory, backends, kernels) if eng is not None else None
    over = ctx_over_model(cx)
    n = eng.gpus_per_replica(q) if eng is not None else q.gpus
    decision = decide(where=f"{acc.id}" + (f" x{n}" if n > 1 else ""), phases=q.phases, kernels=kernels,
                      rec=rec, memory=memory,
                      utilization=memory.utilization if memory is not None else q.utilization,
                      over=(*over, cx.model.id) if over is not None and cx.model is not None else None,
                      held=_merge(glob_out.reasons), glob_caveats=glob_caveats, pick=pick, backends=backends,
                      long_context=eng.long_context if eng is not None else None,
                      unmodelled=_unmodelled(cx), runs=picked_refusals(cx, pick, kstat))
    first = _picked_caveats(decision, backends)
    if first:
        glob_caveats = _merge(first + glob_caveats)
    depends = sorted({d for k in kernels if k.status != "rejected" for rs in (k.reasons, k.caveats) for r in rs
                      for d in r.depends_on})
    qd = q.as_dict()
    qd["gpu"] = acc.id
    _mark_evidence_scope(cx.img, [*kernels, *backends])
    return Answer(query=qd, verdict=decision.verdict, summary="", kernels=kernels, memory=memory,
                  claims_used=sorted(used), depends_on=depends, backends=backends, caveats=glob_caveats,
                  assumed=assumed, notes=list(cx.notes), ranking=ranking, recommended=rec,
                  engine=pick.to_dict() if pick is not None else None, decision=decision)


def picked_refusals(cx: Ctx, pick: Pick | None, kstat: dict[str, tuple[dict[str, KernelStatus], Outcome]]) -> dict[
        str, list[str]]:
    """The picked backend's own judgement of each kernel it runs here, as its reasons ("ARCH (claim-id)"): its
    recorded call's outcome in each phase it is called (kbtool/solve/calls.py), or, where it records no call of the
    kernel, the kernel layer's plain outcome. Not the kernel's answer: that takes the best call of every backend
    that runs the kernel, so another backend's call could hide this one's refusal, or lend it one it does not
    have."""
    if pick is None or pick.selected not in cx.called:
        return {}
    bk = cx.called[pick.selected]
    return {k: sorted({_refusal(r) for o in bk.outcomes[k].values() for r in o.reasons}) if k in bk.outcomes
            else sorted({_refusal(r) for r in kstat[k][1].reasons}) for k in bk.status}


def _refusal(r: Reason) -> str:
    """A reason as the verdict names it: its code and the claim that gives it."""
    return f"{r.code} ({r.claim})" if r.claim else r.code


def _as_called(cx: Ctx, kid: str, bs: list[str], statuses: dict[str, KernelStatus],
               combined: Outcome) -> dict[str, KernelStatus]:
    """A kernel's phase statuses where its backends call it (kbtool/solve/calls.py): in a phase where some backend's
    recorded call holds, the best call's outcome replaces the kernel's plain judgement, reasons included."""
    out = dict(statuses)
    judged: dict[str, Outcome] = {}
    for p in statuses:
        calls = [cx.called[b].outcomes[kid][p] for b in bs
                 if b in cx.called and p in cx.called[b].outcomes.get(kid, {})]
        if calls:
            judged[p] = min(calls, key=lambda c: SEVERITY[c.status])
            out[p] = judged[p].status
    if not judged:
        return out
    every = set(judged) == set(statuses)

    def kept(r: Reason) -> bool:  # a plain reason without a phase stands for every phase
        return r.phase not in judged and not (r.phase is None and every)

    many = len(statuses) > 1
    combined.reasons = [r for r in combined.reasons if kept(r)] + [
        r.with_phase(p) if many else r for p, o in judged.items() for r in o.reasons]
    combined.caveats = [r for r in combined.caveats if kept(r)] + [
        r.with_phase(p) if many else r for p, o in judged.items() for r in o.caveats]
    return out


def _unmodelled(cx: Ctx) -> dict[str, str]:
    """The serve line's flags that move GPU memory kb does not model, with what each moves (Engine.memory_flags),
    and the retired ones an older line still sets (Engine.retired_memory_flags: listed as not a flag of the release,
    `--speculative_model (not a flag of vLLM 0.34.0)`, and matched by the flag as typed, underscores as dashes)."""
    eng = engines.get(cx.q.engine)
    if eng is None:
        return {}
    out = {f: eng.memory_flags[f] for f in cx.q.ignored if f in eng.memory_flags}
    out.update(eng.unmodelled_memory(cx))
    for entry in cx.q.ignored:
        typed = entry.split(" ", 1)[0]
        flag = "--" + typed[2:].replace("_", "-") if typed.startswith("--") else typed
        if flag in eng.retired_memory_flags and typed not in out:
            out[typed] = eng.retired_memory_flags[flag]
    return out


def _picked_caveats(d: Decision, backends: list[BackendAnswer]) -> list[Reason]:
    """The caveats to show first: the picked backend's engine-layer ones, and where the engine starts a backend
    whose kernels kb refuses here (head size, architecture, KV dtype, ...), that refusal."""
    pick = d.pick
    picked = next((b for b in backends if pick is not None and b.id == pick.selected), None)
    if picked is None or pick is None:
        return []
    first = [r for r in picked.caveats if r.layer == "engine" and not r.handled]
    if d.case == "ENGINE_KERNELS_REFUSE":
        names = ", ".join(d.detail["kernels"])
        builds = ", ".join(d.detail["builds"])
        first.insert(0, structural("KERNELS_REJECTED", f"{pick.label} validates this backend, but kb's claims about "
                                   f"the builds it calls ({builds}) refuse its call for every kernel it runs ({names}; "
                                   "--explain): expect a failure at first use", "engine", subject=picked.id))
    elif d.detail.get("unscoped"):
        names = ", ".join(d.detail["unscoped"])
        codes = "; ".join(d.detail.get("refusals") or [])
        first.insert(0, structural("KERNELS_DOUBTED", f"{pick.label} validates this backend; kb's kernel claims refuse "
                                   f"{names} here ({codes}), but kb has no claim about the build {pick.label} "
                                   "calls that refuses it (no call recorded, or the claims are about another build; "
                                   "--explain): a doubt, not a predicted failure", "engine", subject=picked.id))
    return first


def _memory(cx: Ctx, acc: AcceleratorV, env: dict[str, Any], assumed: dict[str, Any]) -> Memory | None:
    """The memory block, sized by the engine asked, or without one by the registry's accounting engine (named on
    the `assumed:` line)."""
    if cx.model is None:
        return None
    eng = engines.get(cx.q.engine)
    if eng is None:
        eng = engines.accounting()
        mem = eng.memory(cx, acc, env, assumed)
        if mem is not None and mem.pool is not None:
            assumed["memory"] = f"{mem.pool.label}'s accounting (no --engine)"
        return mem
    return eng.memory(cx, acc, env, assumed)


def _memory_left(cx: Ctx, acc: AcceleratorV, memory: Memory | None) -> int | None:
    """Bytes left per GPU after weights and the KV cache, as the memory block sized them, or the usable capacity
    without a model."""
    if memory is not None:
        return memory.available_bytes - memory.kv_bytes
    capacity = acc.capacity_bytes()
    if capacity is None or cx.model is not None:
        return None
    return int(capacity * cx.q.utilization)


def _handled(cx: Ctx, kernels: list[KernelAnswer], backends: list[BackendAnswer]) -> None:
    """A caveat that a claim in effect here settles (its `handles`: an engine's build keeps on the fix the caveat
    asks for) is shown as handled, citing that claim and its status here, and no longer demotes the answer. The
    settling claim is about the same subject and holds where its `when` holds in the caveat's phase (and its
    verdicts do not refute it there)."""
    answers: list[KernelAnswer | BackendAnswer] = [*kernels, *backends]
    for a in answers:
        if not a.caveats:
            continue
        for r in a.caveats:
            j = cx.judges.get(r.phase or "") or next(iter(cx.judges.values()))
            for h in cx.img.claims(r.subject or a.id):
                if r.claim not in h.handles or j.ev(h.when) is not True:
                    continue
                status, where = status_here(h, j)
                if status in ("refuted", "disputed"):
                    continue
                r.handled = f"handled: {j.fill(h.message)} [{h.id}, {where or status}]"
                break
        if a.status == "caveat" and all(r.handled for r in a.caveats):
            a.status = "ok"
            a.phase_status = {p: "ok" if s == "caveat" else s for p, s in a.phase_status.items()}


def _derived_depends(kernels: list[KernelAnswer], env: dict[str, Any]) -> None:
    """An answer that depends on a derived variable names the inputs behind it that were not given."""
    for k in kernels:
        for r in k.reasons + k.caveats:
            if any(d in DERIVED_FROM for d in r.depends_on):
                inputs = {x for d in r.depends_on for x in DERIVED_FROM.get(d, [d])}
                missing = sorted(x for x in inputs if env.get(x) is None)
                if "score_matrix_fits" in r.depends_on:
                    give = " ".join(dict.fromkeys(GIVE.get(x, f"--{x}") for x in missing))
                    r.allowed = ("batch x num_heads x q_len x kv_len x 4 B fits in the memory left " +
                                 (f"(give {give})" if missing else "(kb sizes no memory for this question)"))
                r.depends_on = missing or ["memory left"]


def _mark_evidence_scope(img: Image, answers: list[KernelAnswer] | list[Any]) -> None:
    """Each verified or refuted reason says which architectures its evidence ran on (evidence is conservative)."""
    for a in answers:
        for rs in (a.reasons, a.caveats, a.refuted):
            for r in rs:
                if r.evidence and r.verification in ("verified", "refuted", "disputed"):
                    archs = {img.evidence_arch.get(e) for e in r.evidence}
                    r.verified_on = sorted(arch for arch in archs if arch)


def solve(kb: Image | KB, q: Query) -> Answer | MultiAnswer:
    """One Answer for --gpu; without it, one row per accelerator in the KB."""
    if not q.gpu and not q.model and not q.kernels and q.head_dim is None and q.ctx is None:
        raise UsageError("nothing to answer", fix="give --gpu and/or --model, e.g. kb query --gpu h100 --ctx 128k")
    if isinstance(kb, Image):
        img = kb
    else:  # a loaded KB (views, tests): built here; the query path hands in the cached image
        from kbtool.solve.imagebuild import image_of

        img = image_of(kb)
    cx = prepare(img, q)
    if q.gpu:
        q.gpu = resolve(img, q.gpu, "accelerator")
        return _solved(cx, img.accelerator(q.gpu))
    rows = [_solved(cx, a) for a in img.accelerators()]
    return MultiAnswer(query=q.as_dict(), rows=rows)


def _solved(cx: Ctx, acc: AcceleratorV) -> Answer:
    """solve_one; where the checkpoint's dtype was not read (a quantized checkpoint known by its name only,
    ModelV.dtype_unread) and the engine starts, the same question in fp16 too: where the engine's pick then fails
    at first use (ENGINE_FAILS), the answer is conditional on that dtype (DTYPE_UNREAD), with the failure named."""
    ans = solve_one(cx, acc)
    d = ans.decision
    if cx.model is None or not cx.model.dtype_unread or cx.q.dtype is not None or d is None or d.case != "ENGINE":
        return ans
    cx.q.dtype = "fp16"
    try:
        alt = solve_one(cx, acc).decision
    finally:
        cx.q.dtype = None
    if alt is None or alt.case != "ENGINE_FAILS":
        return ans
    d.case, d.verdict = "DTYPE_UNREAD", CASES["DTYPE_UNREAD"]
    d.detail["fails"] = dict(alt.detail["fails"])
    ans.verdict = d.verdict
    return ans

