"""Applying claims to one environment: which gates reject, leave unknown, or add a caveat.

A claim applies to its subject when its `when` holds (three-valued) and its version scope admits the
versions the query gave (`--lib`). Refuted claims are evaluated and shown but never enforced.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kbtool.model import Claim
from kbtool.solve.answer import KernelStatus, Reason
from kbtool.solve.conditions import (
    Env,
    allowed_values,
    compare_versions,
    describe,
    evaluate,
    false_leaves,
    passes_or_not_applies,
    residual,
    unknown_vars,
)

SEVERITY: dict[str, int] = {"ok": 0, "caveat": 1, "unknown": 2, "rejected": 3}


def worst(statuses: Iterable[KernelStatus]) -> KernelStatus:
    return max(statuses, key=lambda s: SEVERITY[s], default="ok")


def best(statuses: Iterable[KernelStatus]) -> KernelStatus:
    return min(statuses, key=lambda s: SEVERITY[s], default="rejected")


def in_scope(claim: Claim, libs: dict[str, str]) -> bool:
    """False when a version the query gave falls outside every range the claim has for that library."""
    by_lib: dict[str, list[bool]] = {}
    for r in claim.scope:
        v = libs.get(r.library)
        if v is None:
            continue
        ok = True
        if r.introduced and compare_versions(v, r.introduced) < 0:
            ok = False
        if r.fixed and compare_versions(v, r.fixed) >= 0:
            ok = False
        if r.last_affected and compare_versions(v, r.last_affected) > 0:
            ok = False
        by_lib.setdefault(r.library, []).append(ok)
    return all(any(oks) for oks in by_lib.values())


def scope_text(claim: Claim) -> str | None:
    parts = []
    for r in claim.scope:
        rng = []
        if r.introduced:
            rng.append(f">= {r.introduced}")
        if r.fixed:
            rng.append(f"< {r.fixed}")
        if r.last_affected:
            rng.append(f"<= {r.last_affected}")
        parts.append(f"{r.library} {', '.join(rng)}".strip())
    return "; ".join(parts) or None


_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_-]*)\}")


def fill(template: str, env: Env) -> str:
    """Fill {var} placeholders from the environment; a missing input shows as '?'."""

    def sub(m: re.Match[str]) -> str:
        v = env.get(m.group(1))
        return "?" if v is None else str(v).lower() if isinstance(v, bool) else str(v)

    return _PLACEHOLDER.sub(sub, template)


@dataclass
class Outcome:
    """The result of applying a set of claims in one environment."""

    status: KernelStatus = "ok"
    reasons: list[Reason] = field(default_factory=list)
    caveats: list[Reason] = field(default_factory=list)
    refuted: list[Reason] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def add(self, other: Outcome) -> None:
        self.status = worst([self.status, other.status])
        self.reasons += other.reasons
        self.caveats += other.caveats
        self.refuted += other.refuted
        self.used |= other.used


def _observed(claim: Claim, env: Env) -> Any:
    leaves = false_leaves(claim.requires, env)
    names = list(dict.fromkeys(leaf.var for leaf in leaves))
    if len(names) == 1:
        return env.get(names[0])
    return {n: env.get(n) for n in names} or None


def _reason(claim: Claim, env: Env, layer: str, *, allowed: Any = None, depends: list[str] | None = None,
            message: str | None = None) -> Reason:
    status = claim.verification.status
    return Reason(
        claim=claim.id, code=claim.reason.code, message=message or fill(claim.reason.message, env),
        observed=None if depends else _observed(claim, env), allowed=allowed,
        verification=status, enforced=status != "refuted", layer=layer,
        depends_on=depends or [], evidence=list(claim.verification.evidence),
        sources=[s.locator() for s in claim.sources], subject=claim.subject, scope=scope_text(claim),
        workaround=claim.reason.workaround, phase=env.get("phase"),
    )


def apply_claim(claim: Claim, env: Env, layer: str) -> tuple[KernelStatus, Reason | None]:
    """(status this claim imposes, its reason). `ok` with None when it does not bite."""
    w = evaluate(claim.when, env)
    if w is False:
        return "ok", None
    if claim.effect == "reject":
        r = evaluate(claim.requires, env)
        if r is True:
            return "ok", None
        if r is False and w is True:
            return "rejected", _reason(claim, env, layer, allowed=allowed_values(residual_requires(claim, env)))
        cond = passes_or_not_applies(claim.when, claim.requires)
        deps = unknown_vars(cond, env)
        passes = describe(residual(cond, env))
        msg = f"{fill(claim.reason.message, env)} [depends on {', '.join(deps)}: passes when {passes}]"
        return "unknown", _reason(claim, env, layer, allowed=passes, depends=deps, message=msg)
    if claim.effect == "caveat":
        r = evaluate(claim.requires, env) if claim.requires is not None else False
        if r is True:
            return "ok", None
        if w is True and r is False:
            return "caveat", _reason(claim, env, layer)
        deps = sorted(set(unknown_vars(claim.when, env)) | set(unknown_vars(claim.requires, env)))
        when_txt = describe(residual(claim.when, env))
        msg = f"{fill(claim.reason.message, env)} [may apply, depends on {', '.join(deps)}: applies when {when_txt}]"
        return "caveat", _reason(claim, env, layer, depends=deps, message=msg)
    return "ok", None  # `supports` claims do not gate


def residual_requires(claim: Claim, env: Env) -> Any:
    """What the requirement asks for, narrowed to the leaves that failed where that is simpler."""
    leaves = false_leaves(claim.requires, env)
    if len(leaves) == 1:
        return leaves[0]
    return claim.requires if claim.requires is not None else True


def apply_claims(claims: Iterable[Claim], env: Env, libs: dict[str, str], layer: str = "kernel") -> Outcome:
    out = Outcome()
    for c in claims:
        if not in_scope(c, libs):
            continue
        if evaluate(c.when, env) is not False and c.effect != "supports":
            out.used.add(c.id)
        status, reason = apply_claim(c, env, layer)
        if reason is None:
            continue
        if c.verification.status == "refuted":
            out.refuted.append(reason)
            continue
        out.status = worst([out.status, status])
        (out.caveats if status == "caveat" else out.reasons).append(reason)
    return out


def structural(code: str, message: str, layer: str = "kernel", *, observed: Any = None, allowed: Any = None,
               depends: list[str] | None = None, subject: str | None = None) -> Reason:
    """A reason from the records' structure (phases, layouts, engine wiring) rather than from a claim."""
    return Reason(claim="", code=code, message=message, observed=observed, allowed=allowed,
                  verification="structural", layer=layer, depends_on=depends or [],
                  subject=subject)
