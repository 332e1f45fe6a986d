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
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kbtool.model import Claim, Evidence
from kbtool.model.common import condition_vars
from kbtool.probe.scoping import ScopeEvent, apply_event, conflicts, event_for, in_range, scope_dump
from kbtool.solve.conditions import compare_versions, evaluate

ARCH_VARS = {"sm", "cc", "gpu"}


@dataclass(frozen=True)
class Update:
    claim: str
    old_status: str
    new_status: str
    verification: dict[str, Any]
    why: str
    changes: bool = True  # whether it changes the claim file (`kb probe apply` lists changes first)


@dataclass(frozen=True)
class Skip:
    claim: str
    why: str


def run_vars(evidence: Evidence) -> dict[str, Any]:
    """Query variables the run fixes: sm, cc, gpu, vendor and library versions."""
    env = evidence.environment
    out: dict[str, Any] = {}
    if not env.gpu.lower().startswith("no gpu"):  # an engine probe (kbtool/probe/engine.py) runs on no vendor's GPU
        out["vendor"] = "amd" if env.gpu.lower().startswith(("amd", "instinct")) else "nvidia"
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
    families: dict[str, list[Any]] = {}  # a library and the forks that share its code for this claim
    for r in claim.scope:
        families.setdefault(r.fork_of or r.library, []).append(r)
    for lib, ranges in families.items():
        used = [(r, v) for r in ranges if (v := verdict_scope.get(r.library) or rvars.get(r.library)) is not None]
        if not used:  # the judge may name the library it tested
            return f"the run did not use {lib}"
        if not any(_in_range(str(v), r.introduced, r.fixed, r.last_affected) for r, v in used):
            names = ", ".join(sorted({f"{r.library} {v}" for r, v in used}))
            return f"{names} is outside the claim's version scope"
    sm = rvars.get("sm")
    if claim.archs and sm not in claim.archs and not (condition_vars(claim.requires) & ARCH_VARS):
        return f"the claim is about {', '.join(claim.archs)}, the run was on {sm or 'an unknown architecture'}"
    return None


_STATUS_OF = {"confirmed": "verified", "contradicted": "refuted"}
UNTESTABLE_HERE = "untestable on this architecture"
"""A judge appends this (with why) to an inconclusive verdict on a claim the run's architecture cannot exercise: the
kernel it is about does not run there, so no run on it can confirm or contradict the claim."""


def untestable_here(verdicts: list[dict[str, Any]], claims: Iterable[str], why: str) -> list[dict[str, Any]]:
    """Mark the inconclusive verdicts on `claims` as UNTESTABLE_HERE, saying `why` (what the architecture lacks).
    Judges call it where the run's architecture is not one the claims' kernel runs on."""
    wanted = set(claims)
    for v in verdicts:
        if v["claim"] in wanted and v["verdict"] == "inconclusive":
            v["detail"] += f"; {UNTESTABLE_HERE}: {why}"
    return verdicts


_MISSING = re.compile(r"\((NETWORK|CUBINS)\)|not installed|attributed to flashinfer-trtllm-gen-cubins|"
                      + UNTESTABLE_HERE)
"""An inconclusive verdict whose detail names what the probe host (or its architecture) lacks makes that scope
untestable."""
NETWORK_REASON = "trtllm-gen downloads its kernels at first use: needs network or the cubin package on the probe host"


@dataclass
class _Entry:
    ev: Evidence
    verdict: str
    detail: str
    scope: dict[str, Any]


def _generated(side: dict[str, Any]) -> bool:
    """A side this module wrote for a probe's dispute ("As stated: ..." / "Probe: ..."): rewritten from today's
    verdicts, and dropped once they agree; sides a record's author wrote from disagreeing sources are kept."""
    return str(side.get("position", "")).startswith(("As stated: ", "Probe: "))


def _merge_status(old: str, new: str) -> str:
    """New evidence against the claim's current status: disagreement with earlier evidence is a dispute."""
    if old in ("verified", "refuted") and new in ("verified", "refuted") and old != new:
        return "disputed"
    return new


def verdict_scope(claim: Claim, ev: Evidence, rvars: Mapping[str, Any], vscope: Mapping[str, Any]) -> dict[str, Any]:
    """The ScopedVerdict scope of one evidence verdict: sm, the library versions the claim is scoped to (and
    those the judge names), the phase where the judge limited it."""
    names = {r.library for r in claim.scope} or {
        k for k, v in vscope.items() if isinstance(v, str) and (k in ev.environment.libraries or k == "torch")}
    libraries = {}
    for lib in sorted(names):
        version = vscope.get(lib) or rvars.get(lib)
        if version is not None:
            libraries[lib] = str(version)
    out: dict[str, Any] = {"sm": rvars.get("sm")}
    if libraries:
        out["libraries"] = libraries
    if vscope.get("phase") in ("prefill", "decode"):
        out["phase"] = vscope["phase"]
    return out


def _scope_key(scope: Mapping[str, Any]) -> str:
    return json.dumps(scope, sort_keys=True)


def _scope_text(scope: Mapping[str, Any]) -> str:
    libs = ", ".join(f"{k} {v}" for k, v in (scope.get("libraries") or {}).items())
    phase = f", {scope['phase']}" if scope.get("phase") else ""
    where = scope.get("sm") or "any architecture (no GPU needed)"
    return where + (f" with {libs}" if libs else "") + phase


def _scoped(entries: list[_Entry]) -> dict[str, Any] | None:
    """One ScopedVerdict from the evidence verdicts of one scope: a contradiction is decisive."""
    refuted = [e for e in entries if e.verdict == "contradicted"]
    confirmed = [e for e in entries if e.verdict == "confirmed"]
    chosen, status = (refuted, "refuted") if refuted else (confirmed, "verified") if confirmed else ([], "")
    if not chosen:
        missing = [e for e in entries if e.verdict == "inconclusive" and _MISSING.search(e.detail)]
        if not missing:
            return None
        chosen, status = missing, "untestable"
    reason = " | ".join(f"{e.ev.probe.id} v{e.ev.probe.version}: {e.verdict}; {e.detail}" for e in chosen)
    if status == "untestable" and re.search(r"\((NETWORK|CUBINS)\)|trtllm-gen-cubins", reason):
        reason = f"{NETWORK_REASON}. " + reason
    ids: list[str] = []
    for e in chosen:
        if e.ev.id not in ids:
            ids.append(e.ev.id)
    scope = {k: v for k, v in chosen[0].scope.items() if v is not None}  # an engine probe has no sm
    return {"scope": scope, "status": status, "evidence": ids, "reason": reason[:1200]}


def plan(
    evidence: Iterable[Evidence],
    claims: Mapping[str, Claim],
    today: str,
) -> tuple[list[Update], list[Skip]]:
    """Updates to claims' verification blocks (and version scopes) that these evidence records justify."""
    per_claim: dict[str, list[_Entry]] = {}
    events: dict[str, list[ScopeEvent]] = {}
    skips: list[Skip] = []
    legacy_partial: set[str] = set()
    evidence = list(evidence)
    work = dict(claims)
    held: set[tuple[str, str, str]] = set()  # (claim, probe, library): the probe confirmed it inside its range
    found: list[tuple[ScopeEvent, str]] = []
    for ev in evidence:  # first pass: scope events from runs outside a claim's version range
        rvars = run_vars(ev)
        for v in ev.verdicts:
            claim = work.get(v.claim)
            if claim is None or v.verdict not in ("confirmed", "contradicted"):
                continue
            for r in claim.scope:
                version = v.scope.get(r.library) or rvars.get(r.library)
                if version is None:
                    continue
                if v.verdict == "confirmed" and in_range(str(version), r):
                    held.add((claim.id, ev.probe.id, r.library))
                event = event_for(claim, r.library, str(version), v.verdict == "confirmed", ev.id)
                if event is not None and not _other_reason(claim, rvars, v.scope, r.library):
                    found.append((event, ev.probe.id))
    disagree: dict[str, str] = {}  # versions that disagree (holds above one where it fails) move nothing
    for cid in {e.claim for e, _ in found}:
        why = conflicts([e for e, _ in found if e.claim == cid])
        if why:
            disagree[cid] = why
            skips.append(Skip(cid, f"no scope event: {why}"))
    for event, probe_id in found:
        if event.claim in disagree:
            continue
        # A probe that contradicts the claim above its range moves `fixed` only where the same probe confirmed it
        # inside the range: otherwise it disagrees with the claim at every release (another aspect of it, as
        # vllm-options' head sizes do for cutlass-mla-decode-head-dim-576), and no release is where it changed.
        if event.field == "fixed" and (event.claim, probe_id, event.library) not in held:
            skips.append(Skip(event.claim, f"no scope event from {event.evidence}: {probe_id} confirms the claim "
                                           f"at no release inside its {event.library} range, so its "
                                           f"contradiction at {event.new} is not a change there"))
            continue
        events.setdefault(event.claim, []).append(event)
    for cid, evs in list(events.items()):
        claim = claims[cid]
        for e in _strongest(evs):
            claim = apply_event(claim, e)
        work[cid] = claim
    for ev in evidence:
        rvars = run_vars(ev)
        for v in ev.verdicts:
            claim = work.get(v.claim)
            if claim is None:
                skips.append(Skip(v.claim, f"no such claim (evidence {ev.id})"))
                continue
            why = out_of_scope(claim, rvars, v.scope)
            if why:
                if not any(e.evidence == ev.id for e in events.get(claim.id, [])):
                    skips.append(Skip(v.claim, f"{why} (evidence {ev.id})"))
                continue
            if v.verdict == "partial":
                legacy_partial.add(claim.id)
            per_claim.setdefault(v.claim, []).append(
                _Entry(ev, v.verdict, v.detail or "", verdict_scope(claim, ev, rvars, v.scope)))
    updates: list[Update] = []
    applied = {ev.id for ev in evidence}
    stale = {cid for cid, c in claims.items()
             if any(set(v.evidence) and set(v.evidence) <= applied for v in c.verification.verdicts)}
    for cid in sorted(set(per_claim) | set(events) | stale):
        claim = work[cid]
        block = _block(claims[cid], claim, per_claim.get(cid, []), events.get(cid, []), cid in legacy_partial, today,
                       applied)
        if block is None:
            skips.append(Skip(cid, "inconclusive: the run neither confirmed nor contradicted it"))
            continue
        why = "; ".join(f"{e.ev.probe.id}: {e.verdict}" + (f" ({e.detail})" if e.detail else "")
                        for e in per_claim.get(cid, []))
        why = "; ".join([*(f"scope event: {e.library} {e.field} {e.old} -> {e.new} ({e.why}; evidence {e.evidence})"
                           for e in _strongest(events.get(cid, []))), why]).strip("; ")
        updates.append(Update(cid, str(claims[cid].verification.status), str(block["status"]), block, why))
    return updates, skips


def _other_reason(claim: Claim, rvars: Mapping[str, Any], vscope: Mapping[str, Any], library: str) -> bool:
    """Whether the run is out of the claim's scope for a reason other than `library`'s version."""
    why = out_of_scope(claim.model_copy(update={"scope": [r for r in claim.scope if r.library != library]}),
                       rvars, vscope)
    return why is not None


def _strongest(events: list[ScopeEvent]) -> list[ScopeEvent]:
    """Per library and field, the event that moves the bound furthest (highest last_affected, lowest fixed)."""
    from kbtool.solve.conditions import compare_versions as cmp

    best: dict[tuple[str, str], ScopeEvent] = {}
    for e in events:
        key = (e.library, e.field)
        old = best.get(key)
        further = old is not None and cmp(e.new, old.new) * (1 if e.field == "last_affected" else -1) > 0
        if old is None or further:
            best[key] = e
    return list(best.values())


def _block(
    original: Claim, claim: Claim, entries: list[_Entry], events: list[ScopeEvent], partial: bool, today: str,
    applied: set[str] = frozenset(),  # type: ignore[assignment]
) -> dict[str, Any] | None:
    """The claim's new verification mapping (and its new scope under SCOPE_KEY when a scope event moved it)."""
    old = original.verification.model_dump(mode="json", exclude_defaults=True, by_alias=True)
    by_scope: dict[str, list[_Entry]] = {}
    for e in entries:
        by_scope.setdefault(_scope_key(e.scope), []).append(e)
    scoped = {_scope_key(sv["scope"]): sv for es in by_scope.values() if (sv := _scoped(es)) is not None}  # as stored
    settled = {(sv.get("scope") or {}).get("sm") for sv in scoped.values() if sv["status"] != "untestable"}
    kept = [v for v in old.get("verdicts", []) if _scope_key(v.get("scope") or {}) not in scoped
            and not set(v.get("evidence") or []) <= applied  # judged again now: what it says now stands
            and not (v["status"] == "untestable" and not v.get("evidence")
                     and (v.get("scope") or {}).get("sm") in settled)]  # a run there settles "untestable there"
    verdicts = sorted([*kept, *scoped.values()], key=lambda v: _scope_key(v["scope"]))
    statuses = {v["status"] for v in verdicts} - {"untestable"}
    if partial or statuses == {"verified", "refuted"}:
        status = "disputed"
    elif statuses:
        status = statuses.pop()
    elif verdicts:
        status = "untestable" if str(original.verification.status) in ("unverified", "untestable") else str(
            original.verification.status)
    elif events:
        status = str(original.verification.status)
    elif old.get("verdicts"):  # every earlier verdict was judged again and none stands: back to unverified
        reset: dict[str, Any] = {"status": "unverified", "reason": "judged again: no recorded run decides this claim "
                                 "as it now reads (evidence " + ", ".join(old.get("evidence", [])) + ")",
                                 "checked": today}
        if old.get("sides"):
            reset["sides"] = old["sides"]
        return reset
    else:
        return None
    if not old.get("verdicts") and not any(e.ev.id in old.get("evidence", []) for e in entries):
        status = _merge_status(str(original.verification.status), status)  # earlier evidence without scopes
    agree = {"verified": {"verified"}, "refuted": {"refuted"}}.get(status, {"verified", "refuted", "untestable"})
    ids: list[str] = []
    for v in verdicts:
        if v["status"] in agree:
            ids += [i for i in v["evidence"] if i not in ids]
    if status == "disputed" or status == str(original.verification.status):
        # earlier evidence for the same status stays (in its order), unless it was judged again now and no longer
        # says so (a record whose grid a later run replaced, read as it ran: kbtool.probe.recorded)
        ids = list(dict.fromkeys([*(i for i in old.get("evidence", []) if i not in applied or i in ids), *ids]))
    block: dict[str, Any] = {"status": status, "evidence": ids}
    lines = [f"{_scope_text(v['scope'])}: {v['status']}" for v in verdicts]
    block["reason"] = ("; ".join(lines) + (" | " + verdicts[-1]["reason"] if verdicts else ""))[:1500]
    sourced = [sd for sd in old.get("sides") or [] if not _generated(sd)]  # the sources' own disagreement
    if status == "disputed":
        sides = sourced
        if len(sides) < 2:
            sides = [
                {"position": f"As stated: {original.statement}",
                 "sources": [original.sources[0].model_dump(mode="json", exclude_none=True)]},
                {"position": "Probe: " + "; ".join(lines or [e.detail for e in entries])[:800],
                 "sources": [{"type": "probe", "ref": f"evidence/{i}"} for i in ids or [e.ev.id for e in entries]]},
            ]
        block["sides"] = sides
    elif sourced:
        block["sides"] = sourced  # the sources' disagreement stays on record after a probe settles it
    if not verdicts and old.get("reason"):
        block["reason"] = old["reason"]
    changed = str(original.verification.status) != status
    block["checked"] = today if changed or not old.get("checked") else old["checked"]
    if verdicts:
        block["verdicts"] = verdicts
    if events:
        from kbtool.store.writer import SCOPE_KEY  # the writer (and ruamel) only when a scope moves

        block[SCOPE_KEY] = scope_dump(claim)
    copied: dict[str, Any] = json.loads(json.dumps(block))  # no shared objects: the YAML writer emits anchors for them
    return copied


def untestable_block(claim: Claim, reason: str, today: str, sm: str | None = None) -> dict[str, Any] | None:
    """`untestable` with the reason, for claims no probe has settled. Never replaces evidence: a verified or
    refuted claim is left alone, and a claim disputed by its sources keeps its sides and only gains the reason.
    With `sm` (the probe host's architecture) the reason is also kept as an untestable verdict scoped there, so
    coverage per architecture can tell where the claim could not be tested; a verdict from evidence on that
    architecture is never replaced by it."""
    status = str(claim.verification.status)
    old = claim.verification.model_dump(mode="json", exclude_defaults=True, by_alias=True)
    if status in ("verified", "refuted"):
        return None
    verdicts = list(old.get("verdicts") or [])
    if sm:
        there = [v for v in verdicts if (v.get("scope") or {}).get("sm") == sm]
        if any(v["status"] != "untestable" for v in there):
            return None
        mine = {"scope": {"sm": sm}, "status": "untestable", "reason": reason}
        if old.get("reason") == reason and mine in there:
            return None
        verdicts = [v for v in verdicts if v not in there] + [mine]
    elif old.get("reason") == reason:
        return None
    if status == "disputed":
        block = {**old, "reason": reason}
        if verdicts:
            block["verdicts"] = verdicts
        return block
    out: dict[str, Any] = {"status": "untestable", "reason": reason, "checked": today}
    if verdicts:
        out["verdicts"] = verdicts
    return out
