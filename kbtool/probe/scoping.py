"""Scope events: what evidence outside a claim's version range says about the range (OSV style, issue 20).

A claim's `scope` lists affected ranges per library (introduced / fixed / last_affected). A run on version X
outside that range is not ignored:
- the claim still holds on X above the range: `last_affected` moves up to X (a `fixed` at or below X is
  replaced by last_affected X);
- the claim no longer holds on X above the range: `fixed` is set to X, "at most X": the first release that
  changed is not known, only that X has the change (a `last_affected` below X is replaced);
- the claim holds on X below `introduced`: introduced moves down to X.
Runs that agree with the range as it stands (fails above fixed, fails below introduced) change nothing.
Pure: the caller writes the new ranges, each carrying the evidence that moved it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbtool.model import Claim
from kbtool.model.common import VersionRange
from kbtool.solve.conditions import compare_versions


@dataclass(frozen=True)
class ScopeEvent:
    claim: str
    library: str
    field: str  # last_affected | fixed | introduced
    old: str | None
    new: str
    evidence: str
    why: str


def in_range(version: str, r: VersionRange) -> bool:
    if r.introduced and compare_versions(version, r.introduced) < 0:
        return False
    if r.fixed and compare_versions(version, r.fixed) >= 0:
        return False
    return not (r.last_affected and compare_versions(version, r.last_affected) > 0)


def version_gap(claim: Claim, library: str, version: str) -> VersionRange | None:
    """The single range of `library` that `version` lies outside, or None (inside, or several ranges)."""
    ranges = [r for r in claim.scope if r.library == library]
    if len(ranges) != 1 or in_range(version, ranges[0]):
        return None
    return ranges[0]


def event_for(claim: Claim, library: str, version: str, holds: bool, evidence: str) -> ScopeEvent | None:
    """The event a run on `version` implies (`holds`: the claim was confirmed there), or None."""
    r = version_gap(claim, library, version)
    if r is None:
        return None
    below = bool(r.introduced) and compare_versions(version, r.introduced or "0") < 0
    if below:
        if not holds:
            return None
        return ScopeEvent(claim.id, library, "introduced", r.introduced, version, evidence,
                          f"still holds on {library} {version}, below introduced {r.introduced}")
    if holds:
        old = r.last_affected or r.fixed
        return ScopeEvent(claim.id, library, "last_affected", old, version, evidence,
                          f"still holds on {library} {version}, after {old}")
    if r.fixed:
        return None  # fails at or above `fixed`: what the range already says
    return ScopeEvent(claim.id, library, "fixed", r.last_affected, version, evidence,
                      f"no longer holds on {library} {version} (after last_affected {r.last_affected}): "
                      f"fixed at most {version}")


def apply_event(claim: Claim, event: ScopeEvent) -> Claim:
    """The claim with the event's range moved (and the evidence recorded on that range)."""
    out = []
    for r in claim.scope:
        if r.library != event.library:
            out.append(r)
            continue
        data = r.model_dump(mode="json", exclude_defaults=True)
        if event.field == "introduced":
            data["introduced"] = event.new
        elif event.field == "last_affected":
            data.pop("fixed", None)
            data["last_affected"] = event.new
        else:
            data.pop("last_affected", None)
            data["fixed"] = event.new
        data["evidence"] = [*[e for e in data.get("evidence", []) if e != event.evidence], event.evidence]
        out.append(VersionRange.model_validate(data))
    return claim.model_copy(update={"scope": out})


def conflicts(events: list[ScopeEvent]) -> str | None:
    """Why a set of events for one claim cannot all hold (a version where it holds above one where it fails)."""
    fixed = [e.new for e in events if e.field == "fixed"]
    holds = [e.new for e in events if e.field == "last_affected"]
    if fixed and holds:
        low, high = min(fixed, key=_key), max(holds, key=_key)
        if compare_versions(high, low) >= 0:
            return f"holds on {high} but not on {low}: the versions disagree"
    return None


def _key(v: str) -> Any:
    from kbtool.solve.conditions import parse_version

    return parse_version(v)


def scope_dump(claim: Claim) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json", exclude_defaults=True) for r in claim.scope]
