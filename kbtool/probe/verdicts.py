"""From evidence verdicts to claim verification updates, conservatively (design.md §2, issue 6 item 4).

Evidence changes a claim only inside the scope the run covered:
- the claim's `when` must not be false for the run's architecture, GPU and library versions;
- every library the claim's `scope` names must have been used by the run, at a version inside the range;
- a claim limited to `archs` is touched by a run on another architecture only if its `requires` gates on the
  architecture itself (sm, cc or gpu): such a gate speaks about every architecture, the rejected ones included.
Within scope: confirmed -> verified, contradicted -> refuted, partial (or confirmed and contradicted together,
or disagreeing with earlier evidence) -> disputed with both sides; inconclusive changes nothing.
Everything here is pure: the caller reads the claims and writes the updates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kbtool.model import Claim, Evidence
from kbtool.model.common import condition_vars
from kbtool.solve.conditions import compare_versions, evaluate

ARCH_VARS = {"sm", "cc", "gpu"}


@dataclass(frozen=True)
class Update:
    claim: str
    old_status: str
    new_status: str
    verification: dict[str, Any]
    why: str


@dataclass(frozen=True)
class Skip:
    claim: str
    why: str


def run_vars(evidence: Evidence) -> dict[str, Any]:
    """Query variables the run fixes: sm, cc, gpu, vendor and library versions."""
    env = evidence.environment
    out: dict[str, Any] = {"vendor": "amd" if env.gpu.lower().startswith(("amd", "instinct")) else "nvidia"}
    if env.architecture:
        out["sm"] = env.architecture
    with contextlib.suppress(ValueError):
        out["cc"] = float(env.compute_capability)
    if env.accelerator:
        out["gpu"] = env.accelerator
    if env.torch:
        out["torch"] = env.torch
    if env.cuda:
        out["cuda"] = env.cuda
    for name, version in env.libraries.items():
        out[name] = version
    return out


def _in_range(version: str, introduced: str | None, fixed: str | None, last: str | None) -> bool:
    if introduced and compare_versions(version, introduced) < 0:
        return False
    if fixed and compare_versions(version, fixed) >= 0:
        return False
    return not (last and compare_versions(version, last) > 0)


def out_of_scope(claim: Claim, rvars: Mapping[str, Any], verdict_scope: Mapping[str, Any]) -> str | None:
    """Why this run cannot change this claim, or None when it can."""
    bound = dict(rvars)
    bound.update({k: v for k, v in verdict_scope.items() if isinstance(v, (str, int, float, bool))})
    if evaluate(claim.when, bound) is False:
        return "the claim's `when` does not hold for this run"
    libraries: dict[str, list[Any]] = {}
    for r in claim.scope:
        libraries.setdefault(r.library, []).append(r)
    for lib, ranges in libraries.items():
        version = verdict_scope.get(lib) or rvars.get(lib)  # the judge may name the library it tested
        if version is None:
            return f"the run did not use {lib}"
        if not any(_in_range(str(version), r.introduced, r.fixed, r.last_affected) for r in ranges):
            return f"{lib} {version} is outside the claim's version scope"
    sm = rvars.get("sm")
    if claim.archs and sm not in claim.archs and not (condition_vars(claim.requires) & ARCH_VARS):
        return f"the claim is about {', '.join(claim.archs)}, the run was on {sm or 'an unknown architecture'}"
    return None


_STATUS_OF = {"confirmed": "verified", "contradicted": "refuted"}


def _combine(verdicts: list[str]) -> str | None:
    kinds = set(verdicts) - {"inconclusive"}
    if not kinds:
        return None
    if kinds == {"confirmed"}:
        return "verified"
    if kinds == {"contradicted"}:
        return "refuted"
    return "disputed"


def _merge_status(old: str, new: str) -> str:
    """New evidence against the claim's current status: disagreement with earlier evidence is a dispute."""
    if old in ("verified", "refuted") and new in ("verified", "refuted") and old != new:
        return "disputed"
    return new


def plan(
    evidence: Iterable[Evidence],
    claims: Mapping[str, Claim],
    today: str,
) -> tuple[list[Update], list[Skip]]:
    """Updates to claims' verification blocks that these evidence records justify."""
    per_claim: dict[str, list[tuple[Evidence, str, str]]] = {}
    skips: list[Skip] = []
    for ev in evidence:
        rvars = run_vars(ev)
        for v in ev.verdicts:
            claim = claims.get(v.claim)
            if claim is None:
                skips.append(Skip(v.claim, f"no such claim (evidence {ev.id})"))
                continue
            why = out_of_scope(claim, rvars, v.scope)
            if why:
                skips.append(Skip(v.claim, f"{why} (evidence {ev.id})"))
                continue
            per_claim.setdefault(v.claim, []).append((ev, v.verdict, v.detail or ""))
    updates: list[Update] = []
    for cid, entries in sorted(per_claim.items()):
        claim = claims[cid]
        new = _combine([verdict for _, verdict, _ in entries])
        if new is None:
            skips.append(Skip(cid, "inconclusive: the run neither confirmed nor contradicted it"))
            continue
        old = claim.verification.status
        status = _merge_status(str(old), new)
        block = verification_block(claim, status, entries, today)
        why = "; ".join(f"{ev.probe.id}: {verdict}" + (f" ({d})" if d else "") for ev, verdict, d in entries)
        updates.append(Update(cid, str(old), status, block, why))
    return updates, skips


def verification_block(
    claim: Claim, status: str, entries: list[tuple[Evidence, str, str]], today: str
) -> dict[str, Any]:
    """The claim's new verification mapping: earlier keys kept, status, evidence, checked and reason set."""
    old = claim.verification.model_dump(mode="json", exclude_defaults=True, by_alias=True)
    evidence_ids = list(old.get("evidence") or [])
    if status != "disputed" and str(claim.verification.status) != status:
        evidence_ids = []  # a settled status lists only the evidence that agrees with it
    for ev, _, _ in entries:
        if ev.id not in evidence_ids:
            evidence_ids.append(ev.id)
    details = [f"{ev.probe.id} v{ev.probe.version} on {ev.environment.gpu}: {verdict}" + (f"; {d}" if d else "")
               for ev, verdict, d in entries]
    block: dict[str, Any] = {"status": status, "evidence": evidence_ids}
    if status == "disputed":
        sides = list(old.get("sides") or [])
        if len(sides) < 2:
            sides = [
                {"position": f"As stated: {claim.statement}",
                 "sources": [claim.sources[0].model_dump(mode="json", exclude_none=True)]},
                {"position": "Probe: " + " | ".join(details),
                 "sources": [{"type": "probe", "ref": f"evidence/{ev.id}"} for ev, _, _ in entries]},
            ]
        block["sides"] = sides
    elif old.get("sides"):
        block["sides"] = old["sides"]  # the sources' disagreement stays on record after a probe settles it
    block["reason"] = " | ".join(details)[:1500]
    changed = str(claim.verification.status) != status
    block["checked"] = today if changed or not old.get("checked") else old["checked"]
    return block


def untestable_block(claim: Claim, reason: str, today: str) -> dict[str, Any] | None:
    """`untestable` with the reason, for claims no probe has settled. Never replaces evidence: a verified or
    refuted claim is left alone, and a claim disputed by its sources keeps its sides and only gains the reason."""
    status = str(claim.verification.status)
    old = claim.verification.model_dump(mode="json", exclude_defaults=True, by_alias=True)
    if status in ("verified", "refuted") or old.get("reason") == reason:
        return None
    if status == "disputed":
        return {**old, "reason": reason}
    return {"status": "untestable", "reason": reason, "checked": today}
