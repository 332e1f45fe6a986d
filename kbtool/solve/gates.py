"""Applying claims to one environment: which gates reject, leave unknown, or add a caveat.

A claim applies to its subject when its `when` holds (three-valued) and its version scope admits the
versions the query gave (`--lib`). Its verification status is scoped (design.md §2): a verdict holds only
in the environment its evidence covers (architecture, library release, phase); `effective` derives the status
for this environment. A claim refuted here is evaluated and shown but not enforced; a reject gate disputed
here makes the kernel `disputed`, not `rejected`.
"""

from __future__ import annotations

from kbtool.solve.conditions import (
    allowed_values,
    compare_versions,
    describe,
    evaluate,
    false_leaves,
    passes_or_not_applies,
    residual,
    unknown_vars,
)
from kbtool.solve.parts import Reason
from kbtool.solve.templates import fill

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from kbtool.solve.conditions import Env, Tri
    from kbtool.solve.image import ClaimV
    from kbtool.solve.parts import KernelStatus

SEVERITY: dict[str, int] = {"ok": 0, "caveat": 1, "disputed": 2, "unknown": 3, "rejected": 4}


def _covers(v: tuple[Any, ...], env: Env) -> bool:
    """Whether verdict `v` (sm, libraries, phase, status, evidence) covers this environment."""
    sm, libs, phase = v[0], v[1], v[2]
    if sm and env.get("sm") != sm:
        return False
    if phase and env.get("phase") != phase:
        return False
    for lib, ver in libs:
        got = env.get(lib)
        if got is None or compare_versions(got, ver) != 0:
            return False
    return True


def scope_words(verdicts: Iterable[tuple[Any, ...]]) -> str:
    """'refuted on sm90 (flashinfer 0.6.18, 0.7.2.post1)': verdicts grouped by status, sm and phase."""
    groups: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    for sm, libs, phase, status, _ev in verdicts:
        g = groups.setdefault((status, sm or "any architecture", phase or ""), {})
        for lib, ver in libs:
            if ver not in g.setdefault(lib, []):
                g[lib].append(ver)
    parts = []
    for (status, sm, phase), libs in groups.items():
        where = f"{status} on {sm}" + (f" {phase}" if phase else "")
        if libs:
            where += " (" + "; ".join(f"{lib} {', '.join(vs)}" for lib, vs in libs.items()) + ")"
        parts.append(where)
    return "; ".join(parts)


def effective(claim: ClaimV, env: Env) -> tuple[str, str | None]:
    """(status of `claim` in this environment, the words that say where its verdicts hold).

    Inside a verdict's scope the verdict decides (verified and refuted together: disputed), except that
    "untestable there" leaves a dispute between sources standing. Outside every verdict's scope the claim keeps
    its own status there: disputed where sources disagree, else unverified.
    """
    vs = claim.verdicts
    if not vs:
        if claim.status == "disputed" and sides_agree(claim, env):
            return "unverified", "every side agrees here"
        return claim.status, None
    inside = [v for v in vs if _covers(v, env)]
    if inside:
        got = {v[3] for v in inside}
        st = ("disputed" if {"verified", "refuted"} <= got else "refuted" if "refuted" in got
              else "verified" if "verified" in got else "untestable")
        words = scope_words(inside)
        if st == "untestable":  # what runs elsewhere showed (another build of the same code, say) is worth saying
            words += "".join(f"; {scope_words(out)} only" for out in [[v for v in vs if v not in inside]] if out)
        if st == "untestable" and claim.sides:  # no run decides it here: the sources' dispute stands
            if sides_agree(claim, env):
                return "unverified", f"every side agrees here; {words}"
            return "disputed", f"disputed; {words}"
        return st, words
    own = "disputed" if claim.sides else "unverified" if claim.status in ("verified", "refuted") else claim.status
    if own == "disputed" and sides_agree(claim, env):
        return "unverified", f"every side agrees here; {scope_words(vs)} only"
    return own, f"{own} here; {scope_words(vs)} only"


def sides_agree(claim: ClaimV, env: Env) -> bool:
    """Whether a disputed reject gate's sides all say the subject cannot run here (each side's own requires
    fails): the dispute is about other environments, and here the gate rejects."""
    conds = [s[2] if len(s) > 2 else None for s in claim.sides]
    return bool(conds) and all(c is not None for c in conds) and all(evaluate(c, env) is False for c in conds)


def worst(statuses: Iterable[KernelStatus]) -> KernelStatus:
    return max(statuses, key=lambda s: SEVERITY[s], default="ok")


def best(statuses: Iterable[KernelStatus]) -> KernelStatus:
    return min(statuses, key=lambda s: SEVERITY[s], default="rejected")


def in_scope(claim: ClaimV, libs: dict[str, str]) -> bool:
    """False when a version the query gave falls outside every range the claim has for that library."""
    if not libs or not claim.scope:
        return True
    by_lib: dict[str, list[bool]] = {}
    for library, introduced, fixed, last_affected in claim.scope:
        v = libs.get(library)
        if v is None:
            continue
        ok = True
        if introduced and compare_versions(v, introduced) < 0:
            ok = False
        if fixed and compare_versions(v, fixed) >= 0:
            ok = False
        if last_affected and compare_versions(v, last_affected) > 0:
            ok = False
        by_lib.setdefault(library, []).append(ok)
    return all(any(oks) for oks in by_lib.values())


class Outcome:
    """The result of applying a set of claims in one environment."""

    __slots__ = ("caveats", "reasons", "refuted", "status", "used")

    def __init__(self, status: KernelStatus = "ok", reasons: list[Reason] | None = None,
                 caveats: list[Reason] | None = None, refuted: list[Reason] | None = None) -> None:
        self.status = status
        self.reasons = reasons if reasons is not None else []
        self.caveats = caveats if caveats is not None else []
        self.refuted = refuted if refuted is not None else []
        self.used: set[str] = set()

    def add(self, other: Outcome) -> None:
        if SEVERITY[other.status] > SEVERITY[self.status]:
            self.status = other.status
        self.reasons += other.reasons
        self.caveats += other.caveats
        self.refuted += other.refuted
        self.used |= other.used


_MISS = object()


class Judge:
    """One environment (a query on one accelerator, in one phase) with its evaluations remembered.

    Conditions in the query image are shared objects (kbtool/solve/image.py interns equal ones), so a
    condition is evaluated once per environment however many claims hold it: results are keyed by the
    object's id, which is stable while the image (and so the condition) is alive.
    """

    __slots__ = ("choose", "chosen", "env", "libs", "memo")

    def __init__(self, env: Env, libs: dict[str, str], choose: frozenset[str] = frozenset()) -> None:
        self.env, self.libs = env, libs
        self.memo: dict[Any, Any] = {}
        self.choose = choose  # inputs the typical profile sets to what the gate needs (the paged-KV block size)
        self.chosen: dict[str, list[str]] = {}  # subject -> "block_size % 256 == 0 (flash-attention-2 needs it)"

    def ev(self, cond: Any) -> Tri:
        if cond is None:
            return True
        key = id(cond)
        v = self.memo.get(key, _MISS)
        if v is _MISS:
            v = self.memo[key] = evaluate(cond, self.env)
        return v  # type: ignore[no-any-return]

    def fill(self, template: str) -> str:
        key = ("fill", template)
        v: str | None = self.memo.get(key)
        if v is None:
            v = self.memo[key] = fill(template, self.env)
        return v

    def once(self, key: tuple[Any, ...], make: Any) -> Any:
        v = self.memo.get(key, _MISS)
        if v is _MISS:
            v = self.memo[key] = make()
        return v


def _observed(requires: Any, env: Env) -> Any:
    leaves = false_leaves(requires, env)
    names = list(dict.fromkeys(leaf[0] for leaf in leaves))
    if len(names) == 1:
        return env.get(names[0])
    return {n: env.get(n) for n in names} or None


def status_here(claim: ClaimV, j: Judge) -> tuple[str, str | None]:
    """`effective` for this judge's environment, remembered."""
    return j.once(("eff", claim.id), lambda: effective(claim, j.env))  # type: ignore[no-any-return]


def measured_words(rows: Iterable[tuple[Any, ...]], env: Env) -> str:
    """'; measured on nvidia-h200-sxm (vllm-flash-attn-3 0.24.0): 1.9e-03 to 2.2e-03 at ctx 131072, head_dim 128':
    the values the claim's verifying runs measured, at the query's head dim where they cover it."""
    rows = list(rows)
    hd = env.get("head_dim")
    same = [r for r in rows if dict(r[3]).get("head_dim") in (hd, None)] or rows
    values = sorted(r[1] for r in same)
    conds = dict(same[0][3])
    where = ", ".join(f"{k} {conds[k]}" for k in ("ctx", "head_dim") if k in conds and all(
        dict(r[3]).get(k) == conds[k] for r in same))
    lib = conds.get("library")
    lo, hi = f"{values[0]:.1e}", f"{values[-1]:.1e}"
    what = lo if lo == hi else f"{lo} to {hi}"  # one figure where the range rounds to one
    ref = f" against {conds['reference']}" if conds.get("reference") else ""
    on = f" on {same[0][4]}" if same[0][4] else ""
    return f"; measured{on}{f' ({lib})' if lib else ''}: relative error {what}{ref}{f' at {where}' if where else ''}"


def _reason(claim: ClaimV, j: Judge, layer: str, *, observed: Any = None, allowed: Any = None,
            depends: list[str] | None = None, message: str | None = None) -> Reason:
    status, where = status_here(claim, j)
    r = Reason.of_claim(claim.id, claim.code, message or j.fill(claim.message), observed, allowed, status,
                        layer, list(depends) if depends else [], list(claim.evidence), list(claim.sources),
                        j.env.get("phase"), claim.subject, claim.scope_text, claim.workaround)
    r.verdict, r.fails = where, claim.effect == "fails"
    if claim.measured and claim.effect != "reject":
        r.message += measured_words(claim.measured, j.env)
    if claim.sides and status == "disputed":
        r.sides = [{"position": s[0], "sources": list(s[1])} for s in claim.sides]
    return r


def apply_claim(claim: ClaimV, j: Judge, layer: str, w: Tri | None = None) -> tuple[KernelStatus, Reason | None]:
    """(status this claim imposes, its reason). `ok` with None when it does not bite. `w`: its `when`, if known."""
    env = j.env
    if w is None:
        w = j.ev(claim.when)
    if w is False:
        return "ok", None
    when, req = claim.when, claim.requires
    memo = j.memo
    if claim.effect == "reject":
        r = j.ev(req)
        if r is True:
            return "ok", None
        if r is False and w is True:
            key: tuple[Any, ...] = ("rejected", id(req))
            got = memo.get(key)
            if got is None:
                got = memo[key] = (_observed(req, env), allowed_values(residual_requires(req, env)))
            status: KernelStatus = "disputed" if status_here(claim, j)[0] == "disputed" else "rejected"
            return status, _reason(claim, j, layer, observed=got[0], allowed=got[1])
        key = ("unknown", id(when), id(req), claim.message)
        got = memo.get(key)
        if got is None:  # what it depends on, and its message, are the same for every claim with these parts
            cond = passes_or_not_applies(when, req)
            deps, passes = unknown_vars(cond, env), describe(residual(cond, env))
            msg = f"{j.fill(claim.message)} [depends on {', '.join(deps)}: passes when {passes}]"
            got = memo[key] = (deps, passes, msg)
        if j.choose and got[0] and j.choose.issuperset(got[0]):
            j.chosen.setdefault(claim.subject, []).append(got[1])
            return "ok", None
        return "unknown", _reason(claim, j, layer, allowed=got[1], depends=got[0], message=got[2])
    if claim.effect in ("caveat", "fails"):  # a failure at first use: the kernel layer reads it as a caveat
        r = j.ev(req) if req is not None else False
        if r is True:
            return "ok", None
        if w is True and r is False:
            return "caveat", _reason(claim, j, layer, observed=j.once(("observed", id(req)),
                                                                     lambda: _observed(req, env)))

        def maybe() -> tuple[list[str], str]:
            deps = sorted(set(unknown_vars(when, env)) | set(unknown_vars(req, env)))
            return deps, describe(residual(when, env))

        deps, when_txt = j.once(("caveat", id(when), id(req)), maybe)
        if j.choose and deps and j.choose.issuperset(deps):
            return "ok", None
        msg = f"{j.fill(claim.message)} [may apply, depends on {', '.join(deps)}: applies when {when_txt}]"
        return "caveat", _reason(claim, j, layer, depends=deps, message=msg)
    return "ok", None  # `supports` claims do not gate


def residual_requires(requires: Any, env: Env) -> Any:
    """What the requirement asks for, narrowed to the leaves that failed where that is simpler."""
    leaves = false_leaves(requires, env)
    if len(leaves) == 1:
        return leaves[0]
    return requires if requires is not None else True


def apply_claims_phases(claims: Iterable[ClaimV], judges: list[Judge], differ: set[str],
                        layer: str = "kernel") -> list[Outcome]:
    """`apply_claims` in each phase's environment (`judges`, in phase order), evaluating once a claim that reads
    none of the variables in `differ` (those whose values differ between the phases): its status counts in
    every phase and its reason, with no phase, is listed in the first phase only. That is exactly what
    evaluating it per phase gives once the solver merges a kernel's reasons (solver._merge keeps the first of
    the identical per-phase reasons, without its phase)."""
    outs = [Outcome() for _ in judges]
    first, j0 = outs[0], judges[0]
    libs = j0.libs
    memo, env = j0.memo, j0.env  # Judge.ev, inlined: this loop runs once per claim of every kernel
    used: list[str] = []
    for c in claims:
        if libs and not in_scope(c, libs):
            continue
        if not differ.isdisjoint(c.reads):
            for j, o in zip(judges, outs, strict=True):
                _apply_one(c, j, o, layer)
            continue
        when = c.when
        if when is None:
            w: Tri = True
        else:
            w = memo.get(id(when), _MISS)
            if w is _MISS:
                w = memo[id(when)] = evaluate(when, env)
            if w is False:
                continue
        effect = c.effect
        if effect == "supports":
            continue
        used.append(c.id)
        req = c.requires
        if req is not None:
            r = memo.get(id(req), _MISS)
            if r is _MISS:
                r = memo[id(req)] = evaluate(req, env)
            if r is True:  # it passes: the common case, decided without apply_claim
                continue
        status, reason = apply_claim(c, j0, layer, w)
        if reason is None:
            continue
        reason.phase = None
        if reason.verification == "refuted":
            first.refuted.append(reason)
            continue
        for o in outs:
            if SEVERITY[status] > SEVERITY[o.status]:
                o.status = status
        (first.caveats if status == "caveat" else first.reasons).append(reason)
    for o in outs:
        o.used.update(used)
    return outs


def _apply_one(c: ClaimV, j: Judge, out: Outcome, layer: str) -> None:
    w = j.ev(c.when)
    if w is False or c.effect == "supports":
        return
    out.used.add(c.id)
    status, reason = apply_claim(c, j, layer, w)
    if reason is None:
        return
    if reason.verification == "refuted":
        out.refuted.append(reason)
        return
    if SEVERITY[status] > SEVERITY[out.status]:
        out.status = status
    (out.caveats if status == "caveat" else out.reasons).append(reason)


def apply_claims(claims: Iterable[ClaimV], j: Judge, layer: str = "kernel") -> Outcome:
    out = Outcome()
    libs = j.libs
    for c in claims:
        if libs and not in_scope(c, libs):
            continue
        _apply_one(c, j, out, layer)
    return out


def structural(code: str, message: str, layer: str = "kernel", *, observed: Any = None, allowed: Any = None,
               depends: list[str] | None = None, subject: str | None = None) -> Reason:
    """A reason from the records' structure (phases, layouts, engine wiring) rather than from a claim."""
    return Reason(claim="", code=code, message=message, observed=observed, allowed=allowed,
                  verification="structural", layer=layer, depends_on=depends or [],
                  subject=subject)
