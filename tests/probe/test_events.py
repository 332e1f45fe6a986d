"""`kb probe events` (kbtool/probe/events.py) never extends a range past what evidence shows (issue 46): a release
whose refusals the probe cannot attribute stops the range, and a range that would cite no evidence is not written."""

from __future__ import annotations

from pathlib import Path

from kbtool.model import Claim
from kbtool.probe import events
from kbtool.solve.engines.vllm import timeline as tl

SCOPED = [{"library": "vllm", "introduced": "0.33.0", "last_affected": "0.33.0"}]


def pts(*pairs: tuple[str, str]) -> list[tl.Point]:
    return [tl.Point(r, o, f"ev-{r}") for r, o in pairs]


def claim(scope: list[dict[str, str]]) -> Claim:
    return Claim.model_validate({
        "id": "c", "kind": "claim", "name": "c", "subject": "vllm-flash-attn", "statement": "s", "effect": "reject",
        "reason": {"code": "KV_DTYPE", "message": "m"}, "scope": scope,
        "sources": [{"type": "seed", "seed": "001_cecac612a9e92bba.txt"}]})


def test_a_newer_release_that_holds_extends_the_range_with_its_evidence() -> None:
    line = pts(("0.32.0", "fails"), ("0.33.0", "holds"), ("0.34.0", "holds"))
    assert events.proposed(claim(SCOPED), line) == [
        {"library": "vllm", "introduced": "0.33.0", "last_affected": "0.34.0",
         "evidence": ["ev-0.32.0", "ev-0.33.0", "ev-0.34.0"]}]


def test_an_unattributed_release_stops_the_range_on_its_own_bound() -> None:
    """vLLM 0.34.0 refused FLASH_ATTN at points the 0.33.0 claims accept, in new words: not agreement."""
    line = pts(("0.32.0", "fails"), ("0.33.0", "holds"), ("0.34.0", "unattributed"))
    assert events.proposed(claim(SCOPED), line) == [
        {"library": "vllm", "introduced": "0.33.0", "last_affected": "0.33.0", "evidence": ["ev-0.32.0", "ev-0.33.0"]}]
    # nor does a range reach across it: past an unattributed release the claim's own bound stands
    line = pts(("0.32.0", "fails"), ("0.33.0", "holds"), ("0.34.0", "unattributed"), ("0.35.0", "holds"))
    got = events.proposed(claim(SCOPED), line)
    assert got is not None and all(r.get("last_affected") != "0.35.0" or r.get("introduced") != "0.33.0" for r in got)
    assert not any("ev-0.34.0" in r.get("evidence", []) for r in got)


def test_a_range_that_would_cite_no_evidence_is_held_back(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("unchanged\n")
    line = {"c": pts(("0.32.0", "fails"), ("0.33.0", "holds"), ("0.34.0", "holds"))}
    # today's judge confirms none of the releases (as when the claims' statements are another release's)
    (ch,) = events.plan({"c": (claim(SCOPED), path)}, line, judged={"c": {}})
    assert ch.new == [{"library": "vllm", "introduced": "0.33.0", "last_affected": "0.34.0"}]
    assert ch.held_back == ("the range (introduced 0.33.0, last_affected 0.34.0) would cite no evidence that "
                            "supports it; left as it is")
    assert events.write([ch]) == [] and path.read_text() == "unchanged\n"
    cited = {"c": {"ev-0.32.0": "contradicted", "ev-0.33.0": "confirmed", "ev-0.34.0": "confirmed"}}
    (ok,) = events.plan({"c": (claim(SCOPED), path)}, line, judged=cited)
    assert ok.held_back is None and ok.new[0]["evidence"] == ["ev-0.32.0", "ev-0.33.0", "ev-0.34.0"]


def test_a_bound_moved_to_a_swept_release_must_cite_that_releases_evidence() -> None:
    """As vLLM 0.34.0's sweep proposed: last_affected 0.33.0 -> 0.34.0, the 0.33.0 evidence dropped and 0.34.0's
    not cited (today's judge has no verdict there on a claim scoped to 0.33.0)."""
    old = [{"library": "vllm", "introduced": "0.20.0", "last_affected": "0.33.0",
            "evidence": ["ev-0.20.0", "ev-0.33.0"]}]
    new = [{"library": "vllm", "introduced": "0.20.0", "last_affected": "0.34.0", "evidence": ["ev-0.20.0"]}]
    swept = {"0.19.1": "ev-0.19.1", "0.20.0": "ev-0.20.0", "0.33.0": "ev-0.33.0", "0.34.0": "ev-0.34.0"}
    assert events.unsupported(old, new, swept) == (
        "the range (introduced 0.20.0, last_affected 0.34.0) would not cite ev-0.34.0, the evidence of its "
        "last_affected 0.34.0 (today's judge gives no verdict there on the claim as scoped); left as it is")
    new[0]["evidence"] = ["ev-0.20.0", "ev-0.34.0"]
    assert events.unsupported(old, new, swept) is None
    assert events.unsupported(old, old, swept) is None  # the record's own range stands as it is
