"""Release timelines and version events from engine evidence (issue 28; OSV affected ranges).

A sweep (`kb probe sweep`) leaves one vllm-selector evidence record per vLLM release; its summary
(`data.outcomes`) holds, for every engine claim, whether the release's own grid bore the claim out ("holds":
every grid point the claim gates came out as it says), went against it ("fails": some point did not), or gave
no point it gates ("none"). Sorted by release, those outcomes are the claim's timeline; where consecutive
recorded releases differ, the change is a version event, OSV style:

- holds -> fails: `last_affected` at the release before (the last one recorded holding) and `fixed` at the
  release after (the first one recorded not holding);
- fails -> holds: `introduced` at the release after.

Each event cites the evidence on both sides. `ranges` turns a timeline into the claim's affected ranges
(introduced / last_affected, each bound proved by evidence); `between` answers a release with no evidence
from the two recorded releases around it. The records' scopes are held to the timelines by KB320
(kbtool/checks/timeline.py) and rewritten from them by `kb probe events --write`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from kbtool.kb import KB
from kbtool.model import Evidence
from kbtool.solve.conditions import compare_versions, version_key

PROBES = {"vllm": "vllm-selector"}
"""library -> the probe whose evidence summary holds per-claim outcomes for each release"""
OUTCOMES_VERSION = 5
"""The summaries read: probes/vllm_selector.py OUTCOMES_VERSION (older ones let another release's claim of the
same gate explain a refusal, which says nothing about the release)"""


@dataclass(frozen=True)
class Point:
    release: str
    outcome: str  # holds | fails | none
    evidence: str
    detail: str = ""


@dataclass(frozen=True)
class Event:
    field: str  # introduced | fixed | last_affected
    release: str
    before: Point
    after: Point

    def text(self) -> str:
        return (f"{self.field} {self.release}: {self.before.release} {self.before.outcome} "
                f"({self.before.evidence}), {self.after.release} {self.after.outcome} ({self.after.evidence})")


def release_evidence(kb: KB, lib: str = "vllm") -> dict[str, tuple[Evidence, dict[str, Any]]]:
    """release -> (the evidence record, its per-claim outcomes): of the library's probe, the newest probe version,
    then the latest run. The outcomes are the evidence summary's; for a run whose summary predates them, the
    replayed shards of its own recorded grid (tests/data/vllm/X/outcomes.json, `kb probe campaign
    --store-outcomes`), used only when every shard's sha256 is the one the evidence recorded."""
    probe = PROBES.get(lib)
    best: dict[str, tuple[Evidence, dict[str, Any]]] = {}
    for ev in kb.of_kind("evidence", Evidence):
        version = ev.environment.libraries.get(lib)
        if ev.probe.id != probe or not version:
            continue
        outcomes = ev.data.get("outcomes") if ev.data.get("outcomes_version") == OUTCOMES_VERSION else None
        if not isinstance(outcomes, dict):
            outcomes = replayed(ev, version)
        if outcomes is None:
            continue
        old = best.get(version)
        if old is None or (ev.probe.version, ev.started, ev.id) > (old[0].probe.version, old[0].started, old[0].id):
            best[version] = (ev, outcomes)
    return dict(sorted(best.items(), key=lambda kv: version_key(kv[0])))


def replayed(ev: Evidence, version: str) -> dict[str, Any] | None:
    """The evidence's outcomes from its replayed grid shards, summed; None unless every case's shard is there
    with the sha256 the case recorded."""
    import json

    from kbtool.solve.engines.vllm.grid import folders

    path = next((f / version / "outcomes.json" for f in folders() if (f / version / "outcomes.json").is_file()),
                None)
    if path is None:
        return None
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("outcomes_version") != OUTCOMES_VERSION:
        return None
    merged: dict[str, dict[str, Any]] = {}
    for case in ev.cases:
        cc, sha = case.params.get("cc"), case.metrics.get("sha256")
        shard = (doc.get("shards") or {}).get(f"cc{cc}")
        if case.outcome != "OK" or shard is None or shard.get("sha256") != sha:
            return None
        for claim, e in shard["outcomes"].items():
            m = merged.setdefault(claim, {"agree": 0, "against": 0, "outcomes": set()})
            m["agree"] += e["agree"]
            m["against"] += e["against"]
            m["outcomes"].add(e.get("outcome"))
            if e.get("unattributed"):
                m["unattributed"] = m.get("unattributed", 0) + e["unattributed"]
            for k in ("accepted", "refused", "unattributed_example"):
                if e.get(k) and k not in m:
                    m[k] = f"cc{cc}: {e[k]}" if not str(e[k]).startswith("cc") else e[k]
    for m in merged.values():  # the release's outcome from its shards': any against fails it, unattributed next
        seen = m.pop("outcomes")
        m["outcome"] = next((o for o in ("fails", "unattributed", "holds") if o in seen), "none")
    return merged


def timelines(kb: KB, lib: str = "vllm") -> dict[str, list[Point]]:
    """claim -> its points, oldest release first."""
    out: dict[str, list[Point]] = {}
    renamed = getattr(kb, "renamed", {})  # a claim's former id (Claim.formerly): the outcomes are the claim's
    for release, (ev, outcomes) in release_evidence(kb, lib).items():
        for former, entry in outcomes.items():
            claim = renamed.get(former, former)
            if not isinstance(entry, dict):
                continue
            detail = str(entry.get("accepted") or entry.get("refused") or "")
            counts = f"{entry.get('agree', 0)} as it says, {entry.get('against', 0)} against"
            if entry.get("unattributed"):  # refused in words the probe cannot attribute (issue 46)
                counts += f", {entry['unattributed']} refused in words no claim reads"
                detail = detail or str(entry.get("unattributed_example") or "")
            out.setdefault(str(claim), []).append(
                Point(release, str(entry.get("outcome")), ev.id, f"{counts}{'; e.g. ' + detail if detail else ''}"))
    return out


def events(points: list[Point]) -> list[Event]:
    """The changes between consecutive releases with an outcome ("none" points are passed over)."""
    known = [p for p in points if p.outcome in ("holds", "fails")]
    out = []
    for a, b in itertools.pairwise(known):
        if a.outcome == b.outcome:
            continue
        if a.outcome == "holds":
            out += [Event("last_affected", a.release, a, b), Event("fixed", b.release, a, b)]
        else:
            out.append(Event("introduced", b.release, a, b))
    return out


def ranges(points: list[Point]) -> list[dict[str, Any]]:
    """The affected ranges the timeline proves: one per run of `holds`, from its first release (`introduced`,
    left open when the run starts at the oldest recorded release) to its last (`last_affected`, left open when
    the run reaches the newest), each with the evidence of its bounds and of the releases outside them."""
    known = [p for p in points if p.outcome in ("holds", "fails")]
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(known):
        if known[i].outcome != "holds":
            i += 1
            continue
        j = i
        while j + 1 < len(known) and known[j + 1].outcome == "holds":
            j += 1
        r: dict[str, Any] = {}
        cites = []
        if i > 0:
            r["introduced"] = known[i].release
            cites += [known[i - 1].evidence, known[i].evidence]
        if j + 1 < len(known):
            r["last_affected"] = known[j].release
            cites += [known[j].evidence, known[j + 1].evidence]
        r["evidence"] = list(dict.fromkeys(cites))
        out.append(r)
        i = j + 1
    return out


def covers(r: dict[str, Any], release: str) -> bool:
    lo, fixed, last = r.get("introduced"), r.get("fixed"), r.get("last_affected")
    if lo and compare_versions(release, str(lo)) < 0:
        return False
    if fixed and compare_versions(release, str(fixed)) >= 0:
        return False
    return not (last and compare_versions(release, str(last)) > 0)


@dataclass(frozen=True)
class Between:
    release: str
    before: Point | None
    after: Point | None

    def text(self) -> str:
        sides = []
        if self.before:
            sides.append(f"{self.before.release} ({_word(self.before.outcome)})")
        if self.after:
            sides.append(f"{self.after.release} ({_word(self.after.outcome)})")
        if self.before and self.after:
            same = self.before.outcome == self.after.outcome
            return (f"between {sides[0]} and {sides[1]}: not swept"
                    f"{'; both sides agree' if same else ''}")
        where = "after the newest" if self.before else "before the oldest"
        return f"{where} recorded release {sides[0] if sides else '(none)'}: not swept"


def _word(outcome: str) -> str:
    return {"holds": "holds", "fails": "does not hold", "none": "not gated"}.get(outcome, outcome)


def between(points: list[Point], release: str) -> Between | Point:
    """The recorded point for `release`, or the recorded releases around it."""
    for p in points:
        if p.release == release:
            return p
    before = [p for p in points if compare_versions(p.release, release) < 0 and p.outcome != "none"]
    after = [p for p in points if compare_versions(p.release, release) > 0 and p.outcome != "none"]
    return Between(release, before[-1] if before else None, after[0] if after else None)
