"""`kb probe events`: claims' vLLM version scopes rewritten from their release timelines (issue 28).

The timeline (kbtool/solve/engines/vllm/timeline.py) says, release by swept release, whether each engine claim held.
A claim
scoped to vLLM releases gets the ranges those releases prove: one range per run of releases where it held, from
the first to the last (`introduced` / `last_affected`), each carrying the evidence of the releases on both sides
of its bounds. Bounds no evidence reaches stay as the record has them: a range that held at the oldest swept
release keeps its own `introduced` (from its sources), one that held at the newest keeps its upper bound. A
claim that held at no swept release is left as it is (KB320 reports it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbtool.model import Claim
from kbtool.model.common import VersionRange
from kbtool.solve.engines.vllm import timeline as tl
from kbtool.store.writer import SCOPE_KEY, update_verification


@dataclass
class ScopeChange:
    claim: str
    path: Path | None
    old: list[dict[str, Any]]
    new: list[dict[str, Any]]
    events: list[tl.Event] = field(default_factory=list)
    held_back: str | None = None  # why `new` is not written (a range no evidence supports)


BLIND = ("unattributed", "unjudged")
"""Timeline outcomes that are neither side of a bound: a range is not extended across them"""


def with_unjudged(lines: dict[str, list[tl.Point]], swept: dict[str, str]) -> dict[str, list[tl.Point]]:
    """Each claim's timeline with an `unjudged` point at every swept release (`swept`: release -> its evidence) that
    has no outcome for the claim: a release swept before the claim existed, whose stored summary never judged it.
    Without them a range would reach across those releases as if the claim had held there (issue 46: never guess)."""
    from kbtool.solve.conditions import version_key

    out = {}
    for cid, points in lines.items():
        have = {p.release for p in points}
        gaps = [tl.Point(r, "unjudged", ev, "the release's summary has no outcome for this claim")
                for r, ev in swept.items() if r not in have]
        out[cid] = sorted([*points, *gaps], key=lambda p: version_key(p.release)) if gaps else points
    return out


def _dump(r: VersionRange) -> dict[str, Any]:
    return r.model_dump(mode="json", exclude_defaults=True)


def proposed(claim: Claim, points: list[tl.Point], lib: str = "vllm",
             judged: dict[str, str] | None = None, pending: set[str] | None = None) -> list[dict[str, Any]] | None:
    """The claim's new scope list, or None when the timeline gives nothing to write. A range cites the
    evidence of its bounds whose verdict on the claim today (`judged`: evidence id -> verdict) is on its side,
    as KB306 holds cited evidence to those verdicts: confirmed inside the range, contradicted outside. A bound
    the timeline counts as holding that today's judge contradicts (the claim is then `disputed`) is not cited;
    the releases on the other side are in the timeline (`kb show CLAIM`)."""
    mine = [_dump(r) for r in claim.scope if r.library == lib]
    # an unattributed release (vLLM refused points the claim lets run, in words the probe cannot attribute) or an
    # unjudged one (swept before the claim existed: its summary has no outcome for it) is neither side: a range ends
    # before it as before the newest release, on the record's own bound
    known = [p for p in points if p.outcome in ("holds", "fails", *BLIND)]
    if not mine or not any(p.outcome == "holds" for p in known):
        return None
    blind = {p.evidence for p in known if p.outcome in BLIND}
    runs: list[dict[str, Any]] = []
    as_break = [dataclasses.replace(p, outcome="fails") if p.outcome in BLIND else p for p in known]
    for r in tl.ranges(as_break):  # its bounds and citations are settled below
        run = {"library": lib, **{k: v for k, v in r.items() if k != "evidence"}}
        held = [p for p in known if p.outcome == "holds" and tl.covers(r, p.release)]
        first, last = held[0], held[-1]
        below = known[known.index(first) - 1] if first is not known[0] else None
        above = known[known.index(last) + 1] if last is not known[-1] else None
        if below is None or below.outcome in BLIND:  # no evidence below: the record's own lower bound,
            run.pop("introduced", None)                         # else the oldest swept release
            own = [m for m in mine if tl.covers(m, first.release)]
            if own and own[0].get("introduced"):
                run["introduced"] = own[0]["introduced"]
            elif not own:
                run["introduced"] = first.release
        if above is None or above.outcome in BLIND:  # no evidence above: the record's own upper bound,
            # else the newest swept release
            own = [m for m in mine if tl.covers(m, last.release)]
            bound: dict[str, Any] = {k: own[0][k] for k in ("fixed", "last_affected") if own and k in own[0]}
            run.pop("last_affected", None)
            run.update(bound if own else {"last_affected": last.release})
        inside = {p.evidence for p in held}
        cites = (set(r["evidence"]) | {first.evidence, last.evidence}) - blind
        if judged is not None:
            if pending is not None:  # inside the new range, outside the old: today's judge has not been asked
                pending |= {e for e in cites & inside if e not in judged}
            cites = {e for e in cites if judged.get(e) == ("confirmed" if e in inside else "contradicted")}
        if cites:
            run["evidence"] = sorted(cites)
        runs.append({k: run[k] for k in ("library", "introduced", "fixed", "last_affected", "evidence") if k in run})
    others = [_dump(r) for r in claim.scope if r.library != lib]
    return others + runs


def plan(claims: dict[str, tuple[Claim, Path | None]], lines: dict[str, list[tl.Point]],
         only: list[str] | None = None, judged: dict[str, dict[str, str]] | None = None,
         pending: dict[str, set[str]] | None = None) -> list[ScopeChange]:
    """The scope changes the timelines prove; `pending` (claim -> evidence ids) collects the evidence a new range
    would cover that today's judge gave no verdict on (the claim was scoped out of that release)."""
    out = []
    for cid, points in sorted(lines.items()):
        if cid not in claims or (only and cid not in only):
            continue
        claim, path = claims[cid]
        asked: set[str] = set()
        new = proposed(claim, points, judged=(judged or {}).get(cid, {}) if judged is not None else None,
                       pending=asked)
        old = [_dump(r) for r in claim.scope]
        if asked and pending is not None:
            pending[cid] = asked
        if new is not None and new != old:
            swept = {p.release: p.evidence for p in points if p.outcome in ("holds", "fails")}
            out.append(ScopeChange(cid, path, old, new, tl.events(points), unsupported(old, new, swept)))
    return out


def as_extended(kb: Any, changes: list[ScopeChange], pending: dict[str, set[str]],
                first: bool = False) -> dict[str, dict[str, str]]:
    """claim -> evidence id -> the verdict the evidence's judge gives once the changes (all at once: a refusal
    another claim explains depends on which claims are in scope) are written: what KB306 will hold the new
    citations to. Only the pending evidence of the release-grid probe is judged, in memory; nothing is written."""
    from kbtool.model import Evidence
    from kbtool.probe.judges import vllm_selector as vs
    from kbtool.probe.recorded import GridSuperseded
    from kbtool.probe.rejudge import observations

    scopes = {ch.claim: ch.new for ch in changes if not ch.held_back or (first and ch.claim in pending)}
    claims = [dict(c, scope=scopes[c["id"]]) if c["id"] in scopes else c for c in vs.engine_claims()]
    out: dict[str, dict[str, str]] = {}
    for eid in sorted({e for es in pending.values() for e in es}):
        ev = kb.get(eid)
        if not isinstance(ev, Evidence) or ev.probe.id != vs.SPEC.id:
            continue
        try:
            judged = vs.judge_as(claims, observations(ev))
        except GridSuperseded:
            continue  # its grid was replaced by a later run: it says nothing here, so nothing cites it anew
        for v in judged:
            if eid in pending.get(v["claim"], ()):
                out.setdefault(v["claim"], {})[eid] = v["verdict"]
    return out


BOUNDS = ("introduced", "fixed", "last_affected")


def unsupported(old: list[dict[str, Any]], new: list[dict[str, Any]], swept: dict[str, str] | None = None,
                lib: str = "vllm") -> str | None:
    """Why a rewritten scope may not be written (issue 46: ranges extended to a new release lost their evidence
    and gained none): a range not among the record's own that cites no evidence, or one with a bound at a swept
    release (`swept`: release -> its evidence) that does not cite that release's evidence."""
    swept = swept or {}
    own = [{k: r.get(k) for k in BOUNDS} for r in old if r.get("library") == lib]
    for r in new:
        if r.get("library") != lib or {k: r.get(k) for k in BOUNDS} in own:
            continue
        bounds = ", ".join(f"{k} {r[k]}" for k in BOUNDS if r.get(k)) or "every release"
        if not r.get("evidence"):
            return f"the range ({bounds}) would cite no evidence that supports it; left as it is"
        for k in BOUNDS:
            v = r.get(k)
            if v and v in swept and swept[v] not in r["evidence"]:
                return (f"the range ({bounds}) would not cite {swept[v]}, the evidence of its {k} {v} (its judge, "
                        f"asked with the ranges as they would be written, does not confirm the claim there); left "
                        f"as it is")
    return None


def write(changes: list[ScopeChange]) -> list[Path]:
    written = []
    for ch in changes:
        if ch.path is None or ch.held_back:
            continue

        def block(data: Any, ch: ScopeChange = ch) -> dict[str, Any]:
            ver = dict(data.get("verification") or {}) if isinstance(data, dict) else {}
            return {**ver, SCOPE_KEY: ch.new}

        if update_verification(ch.path, block):
            written.append(ch.path)
    return written


def run(records: Path, *, write_: bool = False, only: list[str] | None = None) -> tuple[list[ScopeChange],
                                                                                      list[Path]]:
    from kbtool.kb import load_kb
    from kbtool.probe.commands import load_claims

    kb, _ = load_kb(records)
    claims: dict[str, tuple[Claim, Path | None]] = dict(load_claims(records, strict=write_))
    from kbtool.model import Evidence
    from kbtool.probe.judged import judged as today

    judged: dict[str, dict[str, str]] = {}
    for ev in kb.of_kind("evidence", Evidence):  # today's verdicts, as KB306 holds the cited evidence to them
        for cid, on in today(kb).get(ev.id, {}).items():
            judged.setdefault(cid, {})[ev.id] = on["verdict"]
    lines = with_unjudged(tl.timelines(kb), {r: ev.id for r, (ev, _) in tl.release_evidence(kb).items()})
    pending: dict[str, set[str]] = {}
    changes = plan(claims, lines, only, judged, pending)
    # a range newly covering a release cites its evidence where that release's judge, asked with the ranges as they
    # would be written, confirms it: first with every pending range extended, then with those the verdicts allow,
    # until the set written is the set judged (each round can only hold back more)
    for round_ in range(6):
        if not pending:
            break
        extra = as_extended(kb, changes, pending, first=round_ == 0)
        trial = {cid: {**judged.get(cid, {}), **extra.get(cid, {})} for cid in set(judged) | set(extra)}
        again = plan(claims, lines, only, trial)
        if round_ and [(c.claim, c.held_back) for c in again] == [(c.claim, c.held_back) for c in changes]:
            break
        changes = again
    return changes, write(changes) if write_ else []
