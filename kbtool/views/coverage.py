"""Probe coverage per architecture: which claims a GPU of that architecture could settle, and which it has.

A claim is *in scope* on an architecture unless its record rules that architecture out: the subject is another
architecture (or an accelerator of another one), `archs` lists others only, or `when` is false there (read with
the architecture's sm, compute capability and vendor; every other variable unknown). Such a claim is *covered*
when a verdict scoped to that architecture (or to any architecture, as the no-GPU engine probe writes) says
verified, refuted or untestable, or when the claim itself is `untestable` with a reason. Issue #20 asks for
every claim in scope on the probe GPU's architecture to be covered.
"""

from __future__ import annotations

from typing import Any

from kbtool.kb import KB
from kbtool.model import Accelerator, Architecture, Claim, Evidence
from kbtool.solve.conditions import compile_condition, evaluate


def _arch_env(arch: Architecture) -> dict[str, Any]:
    env: dict[str, Any] = {"sm": arch.id, "vendor": arch.vendor}
    if arch.compute_capability:
        env["cc"] = float(arch.compute_capability)
    return env


def in_scope(claim: Claim, arch: Architecture, kb: KB) -> bool:
    """Whether a run on `arch` can bear on the claim (see the module docstring)."""
    subject = kb.get(claim.subject)
    if isinstance(subject, Architecture) and subject.id != arch.id:
        return False
    if isinstance(subject, Accelerator) and subject.architecture != arch.id:
        return False
    if claim.archs and arch.id not in claim.archs:
        return False
    return evaluate(compile_condition(claim.when), _arch_env(arch)) is not False


def covering(claim: Claim, sm: str) -> dict[str, Any] | None:
    """The verdict that covers the claim on `sm`: a scoped verdict there (or for any sm), else the claim's own
    `untestable` reason; None when there is neither."""
    for v in claim.verification.verdicts:
        if v.scope.sm in (sm, None):
            libs = ", ".join(f"{k} {x}" for k, x in sorted(v.scope.libraries.items()))
            return {"status": v.status, "scope": v.scope.sm or "any", "libraries": libs, "evidence": list(v.evidence)}
    if str(claim.verification.status) == "untestable" and claim.verification.reason:
        return {"status": "untestable", "scope": "claim", "libraries": "", "evidence": [],
                "reason": claim.verification.reason}
    return None


def probed_archs(kb: KB) -> list[str]:
    """Architectures some GPU evidence ran on, in id order."""
    return sorted({e.environment.architecture for e in kb.of_kind("evidence", Evidence)
                   if e.environment.architecture})


def coverage(kb: KB, sm: str) -> dict[str, Any]:
    """Claims in scope on `sm`: counts by covering status, and the uncovered ones with their status."""
    arch = kb.get(sm)
    if not isinstance(arch, Architecture):
        return {"arch": sm, "in_scope": 0, "covered": {}, "uncovered": []}
    counts: dict[str, int] = {}
    uncovered = []
    n = 0
    for c in sorted(kb.of_kind("claim", Claim), key=lambda c: c.id):
        if not in_scope(c, arch, kb):
            continue
        n += 1
        cov = covering(c, sm)
        if cov is None:
            uncovered.append({"claim": c.id, "subject": c.subject, "status": str(c.verification.status)})
        else:
            counts[cov["status"]] = counts.get(cov["status"], 0) + 1
    return {"arch": sm, "in_scope": n, "covered": dict(sorted(counts.items())), "uncovered": uncovered}
