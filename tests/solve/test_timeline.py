"""Release timelines -> OSV version events and ranges (kbtool/solve/engines/vllm/timeline.py), and what KB320 and
`kb probe events` make of them (kbtool/checks/timeline.py, kbtool/probe/events.py)."""

from __future__ import annotations

from kbtool.model import Claim
from kbtool.probe.events import proposed
from kbtool.solve.engines.vllm import timeline as tl


def pts(*pairs: tuple[str, str]) -> list[tl.Point]:
    return [tl.Point(r, o, f"ev-{r}") for r, o in pairs]


def claim(scope: list[dict[str, str]]) -> Claim:
    return Claim.model_validate({
        "id": "c", "kind": "claim", "name": "c", "subject": "vllm-flashinfer", "statement": "s", "effect": "reject",
        "reason": {"code": "HEAD_DIM", "message": "m"}, "scope": scope,
        "sources": [{"type": "seed", "seed": "001_cecac612a9e92bba.txt"}]})


def test_events_at_the_change_cite_both_sides() -> None:
    line = pts(("0.19.0", "holds"), ("0.20.0", "none"), ("0.21.0", "holds"), ("0.22.0", "fails"),
               ("0.28.0", "fails"), ("0.30.0", "holds"))
    got = [(e.field, e.release, e.before.evidence, e.after.evidence) for e in tl.events(line)]
    assert got == [("last_affected", "0.21.0", "ev-0.21.0", "ev-0.22.0"), ("fixed", "0.22.0", "ev-0.21.0", "ev-0.22.0"),
                   ("introduced", "0.30.0", "ev-0.28.0", "ev-0.30.0")]


def test_ranges_leave_open_what_no_evidence_bounds() -> None:
    line = pts(("0.19.0", "holds"), ("0.21.0", "holds"), ("0.22.0", "fails"), ("0.30.0", "holds"))
    assert tl.ranges(line) == [{"last_affected": "0.21.0", "evidence": ["ev-0.21.0", "ev-0.22.0"]},
                               {"introduced": "0.30.0", "evidence": ["ev-0.22.0", "ev-0.30.0"]}]


def test_between_names_the_bracketing_releases() -> None:
    line = pts(("0.27.1", "fails"), ("0.28.0", "holds"))
    b = tl.between(line, "0.27.5")
    assert isinstance(b, tl.Between)
    assert b.text() == "between 0.27.1 (does not hold) and 0.28.0 (holds): not swept"
    assert tl.between(line, "0.28.0") == line[1]
    assert tl.between(line, "0.29.0").text() == "after the newest recorded release 0.28.0 (holds): not swept"


def test_proposed_keeps_source_bounds_beyond_the_swept_releases() -> None:
    c = claim([{"library": "vllm", "introduced": "0.24.0", "last_affected": "0.24.0"},
               {"library": "vllm", "introduced": "0.33.0"}])
    line = pts(("0.19.1", "fails"), ("0.22.0", "holds"), ("0.24.0", "holds"), ("0.33.0", "holds"))
    assert proposed(c, line) == [{"library": "vllm", "introduced": "0.22.0",
                                  "evidence": ["ev-0.19.1", "ev-0.22.0", "ev-0.33.0"]}]
    never = pts(("0.19.1", "fails"), ("0.22.0", "fails"))
    assert proposed(c, never) is None


def test_proposed_cites_only_evidence_whose_verdict_today_is_on_its_side() -> None:
    """A bound the timeline counts as holding but today's judge contradicts is not cited (KB306 would refuse it);
    the release past the bound is cited when today's judge contradicts the claim there."""
    c = claim([{"library": "vllm"}])
    line = pts(("0.30.0", "fails"), ("0.31.0", "holds"), ("0.32.0", "holds"), ("0.33.0", "holds"))
    judged = {"ev-0.30.0": "contradicted", "ev-0.31.0": "contradicted", "ev-0.33.0": "confirmed"}
    assert proposed(c, line, judged=judged) == [{"library": "vllm", "introduced": "0.31.0",
                                                 "evidence": ["ev-0.30.0", "ev-0.33.0"]}]
    assert proposed(c, line, judged={}) == [{"library": "vllm", "introduced": "0.31.0"}]
