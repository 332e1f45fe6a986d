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
        "last_affected 0.34.0 (its judge, asked with the ranges as they would be written, does not confirm the claim "
        "there); left as it is")
    new[0]["evidence"] = ["ev-0.20.0", "ev-0.34.0"]
    assert events.unsupported(old, new, swept) is None
    assert events.unsupported(old, old, swept) is None  # the record's own range stands as it is


def test_evidence_a_new_range_covers_is_pending_until_judged_as_extended() -> None:
    """Today's judge gives no verdict on a claim scoped out of a release; plan() names that evidence as pending, and
    the range cites it only once the release's judge, asked with the range extended, confirms it."""
    line = {"c": pts(("0.32.0", "fails"), ("0.33.0", "holds"), ("0.34.0", "holds"))}
    today = {"c": {"ev-0.32.0": "contradicted", "ev-0.33.0": "confirmed"}}  # no verdict at 0.34.0: out of scope
    pending: dict[str, set[str]] = {}
    (held,) = events.plan({"c": (claim(SCOPED), None)}, line, judged=today, pending=pending)
    assert pending == {"c": {"ev-0.34.0"}} and held.held_back is not None
    extended = {"c": {**today["c"], "ev-0.34.0": "confirmed"}}
    (ok,) = events.plan({"c": (claim(SCOPED), None)}, line, judged=extended)
    assert ok.held_back is None and ok.new[0]["last_affected"] == "0.34.0" and "ev-0.34.0" in ok.new[0]["evidence"]
    disputed = {"c": {**today["c"], "ev-0.34.0": "contradicted"}}  # in scope it would be contradicted: not cited
    (no,) = events.plan({"c": (claim(SCOPED), None)}, line, judged=disputed)
    assert no.held_back is not None


def test_as_extended_judges_the_release_with_the_proposed_scopes() -> None:
    """On the shipped records: today's judge says nothing of vllm-flashinfer-dtypes on 0.34.0's evidence (its range
    ends at 0.33.0); asked with the range extended (in memory, nothing written) it judges it, and finds FLASHINFER
    refusing nvfp4 KV there for a reason of the claim's kind that no claim in scope explains: contradicted, so the
    range is not extended although the release outcome (any scope) holds."""
    import pytest

    from kbtool.probe.judges import vllm_selector as vs
    from tests.util import RECORDS, load_kb

    kb = load_kb(RECORDS)
    eid = "2026-12-05-no-gpu-vllm-0-34-0-vllm-selector"
    cid = "vllm-flashinfer-dtypes"
    c = next(x for x in vs.engine_claims() if x["id"] == cid)
    if kb.get(eid) is None or any(r.get("last_affected") != "0.33.0" for r in c["scope"]):
        pytest.skip("no 0.34.0 selector evidence, or the claim's range was moved")
    ch = events.ScopeChange(cid, None, c["scope"], [{**r, "last_affected": "0.34.0"} for r in c["scope"]],
                            held_back="pending")
    assert events.as_extended(kb, [ch], {cid: {eid}}, first=True) == {cid: {eid: "contradicted"}}
    assert events.as_extended(kb, [ch], {cid: {eid}}) == {}  # held back and not the first round: not extended


def test_a_range_does_not_reach_across_releases_swept_before_the_claim_existed() -> None:
    """A claim first recorded for 0.34.0 has no outcome in the summaries of releases swept before it existed. Seen
    here: 0.19.1's outcomes replayed with today's claims held vllm-flash-attn-sm90-d512-fp8-kv-block-64 (vacuously:
    0.19.1 refuses head 512 anyway) and `kb probe events` wrote `introduced 0.19.1`, over 0.20.0-0.33.0 where the
    gate did not exist. Those releases are `unjudged`: the range stops at them, on the record's own bound."""
    own = [{"library": "vllm", "introduced": "0.34.0", "last_affected": "0.34.0"}]
    line = pts(("0.19.1", "holds"), ("0.34.0", "holds"))
    swept = {r: f"ev-{r}" for r in ("0.19.1", "0.20.0", "0.33.0", "0.34.0")}
    filled = events.with_unjudged({"c": line}, swept)["c"]
    assert [(p.release, p.outcome) for p in filled] == [
        ("0.19.1", "holds"), ("0.20.0", "unjudged"), ("0.33.0", "unjudged"), ("0.34.0", "holds")]
    got = events.proposed(claim(own), filled)
    assert got is not None and not any(r.get("introduced") == "0.19.1" and r.get("last_affected") == "0.34.0"
                                       for r in got)
    assert {"library": "vllm", "introduced": "0.34.0", "last_affected": "0.34.0", "evidence": ["ev-0.34.0"]} in got
    assert not any(e in r.get("evidence", []) for r in got for e in ("ev-0.20.0", "ev-0.33.0"))
    # a timeline with an outcome at every swept release is left as it is
    full = pts(("0.33.0", "holds"), ("0.34.0", "holds"))
    assert events.with_unjudged({"c": full}, {"0.33.0": "ev-0.33.0", "0.34.0": "ev-0.34.0"})["c"] == full
