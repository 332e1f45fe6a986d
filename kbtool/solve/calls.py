"""The kernel an engine really calls (issue 45): a backend's recorded call of a kernel names the build (the engine's
fork, a vendored copy, an upstream package) and the shapes it passes. Here the kernel's claims are judged against
that call: on the call's own head dims, and only the claims whose scope names the build. A claim about another build
that would refuse the call becomes a caveat naming both builds, never a refusal: "expect a failure" needs a claim
about the build the engine runs.

A backend with no call recorded for a kernel (or none read in the query's engine release) keeps the kernel layer's
plain judgement, and the refusal it may give is likewise about no particular build (`Called.scoped` false): the
verdict then says so instead of predicting a failure.
"""

from __future__ import annotations

from kbtool.solve.conditions import compare_versions
from kbtool.solve.gates import Judge, Outcome, _apply_one, structural
from kbtool.solve.parts import _Plain

TYPE_CHECKING = False  # the query path imports this module: no typing at run time
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.image import BackendV, CallV, ClaimV


class Called(_Plain):
    """One kernel of a backend as the engine calls it, judged in one phase."""

    SPEC = {
        "kernel": ({"type": "string"}, "Kernel record id"),
        "phase": ({"type": "string"}, "The phase judged"),
        "build": ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "The build the engine calls (null: not "
                                                                      "recorded)"),
        "version": ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "Its version (the engine's release for a "
                                                                        "build inside the engine's wheel)"),
        "fork_of": ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "The upstream library it forks"),
        "call": ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "The call, in words"),
        "shape": ({"type": "object"}, "The query variables the call sets, with their values here"),
        "source": ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "The engine file the call is read from"),
        "status": ({"enum": ["ok", "caveat", "unknown", "disputed", "rejected"]}, "The call's status from the "
                                                                                   "claims about this build"),
        "scoped": ({"type": "boolean"}, "The status rests on claims scoped to this build (a refusal here is a "
                                        "failure to expect); false: no build recorded"),
        "other_builds": ({"type": "array", "items": {"type": "string"}}, "Claims about other builds that would "
                                                                          "refuse this call (shown as caveats)"),
    }
    FIELDS = tuple(SPEC)
    __slots__ = FIELDS
    shape: dict[str, Any]
    other_builds: list[str]

    def __init__(self, **kw: Any) -> None:
        for f in self.FIELDS:
            setattr(self, f, kw.get(f))
        self.shape = kw.get("shape") or {}
        self.other_builds = kw.get("other_builds") or []


def _in_range(version: str | None, r: tuple[str, str | None, str | None, str | None]) -> bool:
    if version is None:
        return True
    _, introduced, fixed, last = r
    if introduced and compare_versions(version, introduced) < 0:
        return False
    if fixed and compare_versions(version, fixed) >= 0:
        return False
    return not (last and compare_versions(version, last) > 0)


def covers(claim: ClaimV, build: str, version: str | None) -> bool:
    """The claim speaks of this build: no library scope (a claim about the kernel as such), or a range naming the
    build whose bounds hold the version. A range of another library (upstream, a pip package) does not reach a fork
    unless the claim lists the fork itself (with fork_of, where the code is the same)."""
    libs = [r for r in claim.scope if r[0] not in ("cuda", "torch")]
    if not libs:
        return True
    return any(r[0] == build and _in_range(version, r) for r in libs)


def matching(backend: BackendV, kernel: str, env: dict[str, Any], engine: str | None) -> CallV | None:
    """The backend's recorded call of `kernel` that holds here (phase, layout, the engine's routing condition, its
    release), or None."""
    from kbtool.solve.conditions import evaluate

    release = env.get(engine) if engine else None
    for c in backend.calls:
        if c.kernel != kernel:
            continue
        if c.phases and env.get("phase") not in c.phases:
            continue
        if c.attention and env.get("attention") not in c.attention:
            continue
        if c.scope and not any(_in_range(str(release) if release else None, r) for r in c.scope):
            continue
        if c.when is not None and evaluate(c.when, env) is not True:
            continue
        return c
    return None


def read_in(c: CallV, release: Any) -> bool:
    """The call was read in this engine release (its scope holds it; no scope or no release: yes). A release outside
    every call's scope is one whose code kb has not read: the backend is judged there as one with no call recorded,
    not as one that calls none of the kernel."""
    return not c.scope or release is None or any(_in_range(str(release), r) for r in c.scope)


def call_env(c: CallV, env: dict[str, Any]) -> dict[str, Any]:
    """The environment as the call sees it: the shape it passes in place of the model's plain head dims."""
    e = dict(env)
    for var, value in c.shape.items():
        e[var] = env.get(value) if isinstance(value, str) else value
    return e


def judge(claims: list[ClaimV], c: CallV, env: dict[str, Any], engine: str | None,
          phase: str) -> tuple[Outcome, Called]:
    """The call judged by the claims about its build, in the call's environment; claims about other builds that
    would refuse or caveat it are listed as caveats naming the build they rest on."""
    e = call_env(c, env)
    version = str(env.get(engine)) if c.bundled and engine and env.get(engine) else (
        str(env[c.build]) if env.get(c.build) else None)
    j = Judge(e, {})
    out, other = Outcome(), Outcome()
    for claim in claims:
        _apply_one(claim, j, out if covers(claim, c.build, version) else other, "kernel")
    others = [r for r in other.reasons if r.claim]
    for r in others:
        libs = sorted({s[0] for cl in claims if cl.id == r.claim for s in cl.scope}) or ["?"]
        out.caveats.append(structural(
            "OTHER_BUILD", f"{r.claim} (about {', '.join(libs)}) would refuse {c.kernel} here: {r.message}; the "
            f"engine calls {c.build}{' ' + version if version else ''}, which that claim does not cover",
            "kernel", subject=c.kernel))
    if others and out.status == "ok":
        out.status = "caveat"
    shape = {k: e.get(k) for k in c.shape}
    return out, Called(kernel=c.kernel, phase=phase, build=c.build, version=version, fork_of=c.fork_of,
                       call=c.call, shape=shape, source=c.source, status=out.status, scoped=True,
                       other_builds=sorted({r.claim for r in others}))


class BackendKernels:
    """A backend's kernels as it calls them here: the status per kernel (absent: recorded calls, none made here),
    the call outcomes per kernel and phase, and what was called."""

    __slots__ = ("called", "outcomes", "status")

    def __init__(self) -> None:
        self.status: dict[str, str] = {}
        self.outcomes: dict[str, dict[str, Outcome]] = {}
        self.called: list[Called] = []


def backend_kernels(backend: BackendV, envs: dict[str, dict[str, Any]], plain: dict[str, tuple[dict[str, Any], Any]],
                    phases_of: dict[str, list[str]], claims_for: Any, engine: str | None) -> BackendKernels:
    """Each kernel of `backend`: judged as called where the backend records its calls of it, else by the kernel
    layer's plain judgement (`plain`: kernel -> (phase statuses, outcome))."""
    from kbtool.solve.gates import SEVERITY

    out = BackendKernels()
    release = next((e.get(engine) for e in envs.values() if engine and e.get(engine)), None)
    for k in backend.kernels:
        if k not in plain:
            continue
        if not any(c.kernel == k and read_in(c, release) for c in backend.calls):
            out.status[k] = plain[k][1].status  # no call recorded, or none read in this release: plain judgement
            continue
        worst_seen = -1
        for p, env in envs.items():
            if p not in phases_of.get(k, []):
                continue
            c = matching(backend, k, env, engine)
            if c is None:
                continue
            o, called = judge(claims_for(k), c, env, engine, p)
            out.outcomes.setdefault(k, {})[p] = o
            out.called.append(called)
            worst_seen = max(worst_seen, SEVERITY[o.status])
        if worst_seen >= 0:
            out.status[k] = next(s for s, v in SEVERITY.items() if v == worst_seen)
    return out
