"""KB320 (kbtool/checks/timeline.py): a claim's version scope against each swept release's evidence."""

from __future__ import annotations

from kbtool.checks.timeline import scope_findings
from kbtool.probe.events import proposed
from tests.solve.test_timeline import claim, pts


def test_kb320_flags_a_release_the_scope_gets_wrong() -> None:
    c = claim([{"library": "vllm", "last_affected": "0.19.1"}])
    line = pts(("0.19.1", "holds"), ("0.21.0", "holds"), ("0.22.0", "fails"))
    found = scope_findings(c, line)
    assert [m for _, m, _ in found] == ["holds on vllm 0.21.0 (ev-0.21.0) but its vllm scope leaves 0.21.0 out"]
    assert "any..0.21.0" in found[0][2]
    fixed = claim(proposed(c, line) or [])
    assert scope_findings(fixed, line) == []


def test_kb321_flags_a_range_bounded_at_a_swept_release_without_evidence() -> None:
    """Issue 46: `kb probe events` left ranges extended to a new release that cited no evidence at all."""
    from kbtool.checks.timeline import unsupported_ranges

    line = pts(("0.32.0", "fails"), ("0.33.0", "holds"), ("0.34.0", "holds"))
    bare = claim([{"library": "vllm", "introduced": "0.33.0", "last_affected": "0.34.0"}])
    assert unsupported_ranges(bare, line) == [(0, "its vllm range's introduced 0.33.0 cites no evidence, although "
                                                  "vllm 0.33.0 was swept (ev-0.33.0: holds)",
                                               "run `kb probe events c` to see what the releases support, or cite "
                                               "the evidence that shows the bound in the range's `evidence`")]
    cited = claim([{"library": "vllm", "introduced": "0.33.0", "last_affected": "0.34.0", "evidence": ["ev-0.34.0"]}])
    unswept = claim([{"library": "vllm", "introduced": "0.10.0"}])  # a bound from sources, where no sweep reaches
    assert unsupported_ranges(cited, line) == [] and unsupported_ranges(unswept, line) == []


def test_a_refuted_claims_range_is_its_refutations_scope() -> None:
    """A claim refuted at the oldest swept release keeps that release in its scope (KB306 holds the verdict inside
    it): the refuting evidence supports the range, and the timeline's "does not hold" there is the refutation, not a
    disagreement. Before, KB320 and KB321 sent such claims to `kb probe events`, which cannot move them (six vLLM
    claims refuted at 0.19.1). Without the verdict, or with one citing other evidence, both still report it."""
    from kbtool.checks.timeline import unsupported_ranges

    line = pts(("0.19.1", "fails"), ("0.20.0", "fails"))
    scope = [{"library": "vllm", "last_affected": "0.19.1"}]
    bare = claim(scope)
    assert next(m for _, m, _ in scope_findings(bare, line)).startswith("does not hold on vllm 0.19.1 (ev-0.19.1")
    assert len(unsupported_ranges(bare, line)) == 1
    refuted = bare.model_copy(update={"verification": bare.verification.model_validate({
        "status": "refuted", "evidence": ["ev-0.19.1"],
        "verdicts": [{"scope": {"libraries": {"vllm": "0.19.1"}}, "status": "refuted", "evidence": ["ev-0.19.1"]}]})})
    assert scope_findings(refuted, line) == [] and unsupported_ranges(refuted, line) == []
    other = bare.model_copy(update={"verification": bare.verification.model_validate({
        "status": "refuted", "evidence": ["ev-other"],
        "verdicts": [{"scope": {"libraries": {"vllm": "0.19.1"}}, "status": "refuted", "evidence": ["ev-other"]}]})})
    assert len(scope_findings(other, line)) == 1 and len(unsupported_ranges(other, line)) == 1
