"""Conservative write-back: evidence changes a claim only inside the scope it covered."""

from __future__ import annotations

from typing import Any

from kbtool.model import Claim, Evidence
from kbtool.probe.verdicts import plan, untestable_block
from kbtool.store.writer import SCOPE_KEY

SRC = [{"type": "seed", "seed": "001_cecac612a9e92bba.txt"}]


def claim(id_: str, **extra: Any) -> Claim:
    data = {"id": id_, "kind": "claim", "name": id_, "subject": "flash-attention-4", "statement": "s",
            "effect": "reject", "reason": {"code": "ARCH", "message": "m"}, "sources": SRC, **extra}
    return Claim.model_validate(data)


def evidence(verdicts: list[tuple[str, str]], *, arch: str = "sm90", cc: str = "9.0", id_: str = "e1",
             libs: dict[str, str] | None = None, scope: dict[str, Any] | None = None) -> Evidence:
    return Evidence.model_validate({
        "id": id_, "kind": "evidence", "name": "n", "probe": {"id": "p", "version": 1},
        "environment": {"gpu": "NVIDIA H200", "compute_capability": cc, "architecture": arch,
                        "accelerator": "nvidia-h200-sxm", "torch": "2.11.0",
                        "libraries": libs if libs is not None else {"flash-attn-4": "4.0.0b36"}},
        "started": "2026-11-30T10:00:00Z",
        "verdicts": [{"claim": c, "verdict": v, "scope": scope or {"sm": arch}} for c, v in verdicts],
        "sources": [{"type": "probe", "ref": "probes/p.py"}]})


def run(claims: list[Claim], evs: list[Evidence]):  # type: ignore[no-untyped-def]
    return plan(evs, {c.id: c for c in claims}, "2026-11-30")


def test_confirmed_and_contradicted_map_to_statuses() -> None:
    ups, skips = run([claim("a"), claim("b"), claim("c")],
                     [evidence([("a", "confirmed"), ("b", "contradicted"), ("c", "inconclusive")])])
    got = {u.claim: u.new_status for u in ups}
    assert got == {"a": "verified", "b": "refuted"}
    assert ups[0].verification["evidence"] == ["e1"] and ups[0].verification["checked"] == "2026-11-30"
    assert [s.claim for s in skips] == ["c"]


def test_an_sm90_run_never_flips_a_claim_about_sm100_only() -> None:
    about_sm100 = claim("x", archs=["sm100"], requires={"var": "head_dim", "le": 128})
    only_on_sm100 = claim("y", when={"var": "sm", "eq": "sm100"})
    ups, skips = run([about_sm100, only_on_sm100], [evidence([("x", "contradicted"), ("y", "confirmed")])])
    assert ups == []
    assert {s.claim for s in skips} == {"x", "y"}


def test_an_architecture_gate_speaks_about_every_architecture() -> None:
    gate = claim("g", archs=["sm100", "sm103"], requires={"var": "sm", "in": ["sm100", "sm103"]})
    ups, _ = run([gate], [evidence([("g", "contradicted")])])
    assert [(u.claim, u.new_status) for u in ups] == [("g", "refuted")]


def test_a_run_above_last_affected_that_still_holds_extends_it() -> None:
    old = claim("o", scope=[{"library": "flash-attn-4", "last_affected": "4.0.0b10"}])
    other_lib = claim("v", scope=[{"library": "vllm"}])
    ups, skips = run([old, other_lib], [evidence([("o", "confirmed"), ("v", "confirmed")])])
    (u,) = ups
    assert u.claim == "o" and u.new_status == "verified"
    assert u.verification[SCOPE_KEY] == [{"library": "flash-attn-4", "last_affected": "4.0.0b36", "evidence": ["e1"]}]
    assert u.verification["verdicts"][0]["scope"] == {"sm": "sm90", "libraries": {"flash-attn-4": "4.0.0b36"}}
    assert "did not use vllm" in skips[0].why


def test_a_run_above_last_affected_that_no_longer_holds_sets_fixed_at_most_there() -> None:
    old = claim("o", scope=[{"library": "flash-attn-4", "last_affected": "4.0.0b10"}])
    inside = evidence([("o", "confirmed")], id_="e0", libs={"flash-attn-4": "4.0.0b5"})
    ups, _ = run([old], [inside, evidence([("o", "contradicted")])])
    (u,) = ups
    assert u.verification[SCOPE_KEY] == [{"library": "flash-attn-4", "fixed": "4.0.0b36", "evidence": ["e1"]}]
    assert u.new_status == "verified" and [v["evidence"] for v in u.verification["verdicts"]] == [["e0"]]


def test_a_probe_that_never_confirms_the_claim_in_its_range_moves_no_bound() -> None:
    """Issue 46: vllm-options contradicts cutlass-mla-decode-head-dim-576 at every release (it reads another
    aspect, the head sizes a backend lists); its run above the range set `fixed` and KB306 then failed."""
    old = claim("o", scope=[{"library": "flash-attn-4", "last_affected": "4.0.0b10"}])
    also_inside = evidence([("o", "contradicted")], id_="e0", libs={"flash-attn-4": "4.0.0b5"})
    ups, skips = run([old], [also_inside, evidence([("o", "contradicted")])])
    assert all(SCOPE_KEY not in u.verification for u in ups)
    assert any("p confirms the claim at no release inside its flash-attn-4 range" in s.why for s in skips)


def test_runs_that_agree_with_the_range_move_nothing() -> None:
    fixed = claim("f", scope=[{"library": "flash-attn-4", "fixed": "4.0.0b20"}])
    ups, skips = run([fixed], [evidence([("f", "contradicted")])])
    assert ups == [] and "outside the claim's version scope" in skips[0].why


def test_versions_that_disagree_make_no_scope_event() -> None:
    old = claim("o", scope=[{"library": "flash-attn-4", "last_affected": "4.0.0b10"}])
    evs = [evidence([("o", "contradicted")], id_="e1", libs={"flash-attn-4": "4.0.0b20"}),
           evidence([("o", "confirmed")], id_="e2", libs={"flash-attn-4": "4.0.0b36"})]
    ups, skips = run([old], evs)
    assert ups == [] and any("versions disagree" in s.why for s in skips)


def test_partial_is_disputed_with_two_sides() -> None:
    ups, _ = run([claim("p")], [evidence([("p", "partial")])])
    v = ups[0].verification
    assert ups[0].new_status == "disputed" and len(v["sides"]) == 2
    assert v["sides"][1]["sources"] == [{"type": "probe", "ref": "evidence/e1"}]


def test_a_contradiction_in_a_scope_is_decisive_there() -> None:
    ups, _ = run([claim("m")], [evidence([("m", "confirmed")], id_="e1"), evidence([("m", "contradicted")], id_="e2")])
    assert ups[0].new_status == "refuted" and ups[0].verification["evidence"] == ["e2"]


def test_verified_in_one_scope_and_refuted_in_another_is_disputed_with_both_verdicts() -> None:
    evs = [evidence([("m", "confirmed")], id_="e1", libs={"flash-attn-4": "4.0.0b30"}),
           evidence([("m", "contradicted")], id_="e2", libs={"flash-attn-4": "4.0.0b36"})]
    ups, _ = run([claim("m", scope=[{"library": "flash-attn-4"}])], evs)
    assert ups[0].new_status == "disputed"
    assert [(v["scope"]["libraries"]["flash-attn-4"], v["status"]) for v in ups[0].verification["verdicts"]] == [
        ("4.0.0b30", "verified"), ("4.0.0b36", "refuted")]


def test_new_evidence_against_earlier_evidence_is_a_dispute() -> None:
    verified = claim("k", verification={"status": "verified", "evidence": ["e0"], "checked": "2026-11-01"})
    ups, _ = run([verified], [evidence([("k", "contradicted")])])
    assert ups[0].new_status == "disputed" and ups[0].verification["evidence"] == ["e0", "e1"]


def test_a_probe_settles_a_source_dispute_and_keeps_the_sides() -> None:
    sides = [{"position": "a", "sources": SRC}, {"position": "b", "sources": SRC}]
    disputed = claim("d", verification={"status": "disputed", "sides": sides})
    ups, _ = run([disputed], [evidence([("d", "contradicted")])])
    assert ups[0].new_status == "refuted"
    assert ups[0].verification["sides"][0]["position"] == "a"


def test_when_is_read_with_the_verdict_scope() -> None:
    decode_only = claim("w", when={"var": "phase", "eq": "decode"})
    ups, skips = run([decode_only], [evidence([("w", "confirmed")], scope={"sm": "sm90", "phase": "prefill"})])
    assert ups == [] and "`when`" in skips[0].why


def test_untestable_never_replaces_evidence() -> None:
    assert untestable_block(claim("u"), "no wheels", "2026-11-30") == {
        "status": "untestable", "reason": "no wheels", "checked": "2026-11-30"}
    verified = claim("v", verification={"status": "verified", "evidence": ["e0"]})
    assert untestable_block(verified, "no wheels", "2026-11-30") is None
    sides = [{"position": "a", "sources": SRC}, {"position": "b", "sources": SRC}]
    disputed = claim("d", verification={"status": "disputed", "sides": sides})
    block = untestable_block(disputed, "no wheels", "2026-11-30")
    assert block is not None and block["status"] == "disputed" and block["reason"] == "no wheels"


def test_untestable_is_scoped_to_the_host_architecture() -> None:
    block = untestable_block(claim("u"), "no wheels", "2026-11-30", "sm90")
    assert block is not None and block["status"] == "untestable"
    assert block["verdicts"] == [{"scope": {"sm": "sm90"}, "status": "untestable", "reason": "no wheels"}]
    again = claim("u", verification=block)
    assert untestable_block(again, "no wheels", "2026-11-30", "sm90") is None  # nothing new to write
    sides = [{"position": "a", "sources": SRC}, {"position": "b", "sources": SRC}]
    disputed = claim("d", verification={"status": "disputed", "sides": sides})
    block = untestable_block(disputed, "no wheels", "2026-11-30", "sm90")
    assert block is not None and block["status"] == "disputed" and block["sides"] == sides
    assert [v["scope"] for v in block["verdicts"]] == [{"sm": "sm90"}]


def test_untestable_keeps_a_verdict_from_evidence_on_that_architecture() -> None:
    sides = [{"position": "a", "sources": SRC}, {"position": "b", "sources": SRC}]
    refuted_there = {"status": "disputed", "sides": sides,
                     "verdicts": [{"scope": {"sm": "sm90"}, "status": "refuted", "evidence": ["e0"]}]}
    assert untestable_block(claim("d", verification=refuted_there), "no wheels", "2026-11-30", "sm90") is None
    other = untestable_block(claim("d", verification=refuted_there), "no wheels", "2026-11-30", "sm100")
    assert other is not None and {v["scope"]["sm"] for v in other["verdicts"]} == {"sm90", "sm100"}


def test_a_claim_the_architecture_cannot_exercise_is_untestable_in_that_scope() -> None:
    from kbtool.probe.verdicts import UNTESTABLE_HERE

    ev = evidence([("t", "inconclusive"), ("i", "inconclusive")])
    ev.verdicts[0].detail = f"0 of 0 gated cases; {UNTESTABLE_HERE}: the kernel is built for sm100 only"
    ev.verdicts[1].detail = "0 of 0 gated cases; no clear answer (error, timeout, OOM or wrong result): hd64"
    ups, skips = run([claim("t"), claim("i")], [ev])
    assert [(u.claim, u.new_status) for u in ups] == [("t", "untestable")]
    assert UNTESTABLE_HERE in ups[0].verification["reason"]
    assert [s.claim for s in skips] == ["i"]


def engine_evidence(verdict: str, id_: str) -> Evidence:
    return Evidence.model_validate({
        "id": id_, "kind": "evidence", "name": "n", "probe": {"id": "p", "version": 1},
        "environment": {"gpu": "no GPU (vllm 0.19.1)", "compute_capability": "n/a", "architecture": None,
                        "accelerator": None, "torch": "2.10.0", "libraries": {"vllm": "0.19.1"}},
        "started": "2026-11-30T10:00:00Z",
        "verdicts": [{"claim": "v", "verdict": verdict, "scope": {"vllm": "0.19.1"}}],
        "sources": [{"type": "probe", "ref": "probes/p.py"}]})


def test_a_later_engine_run_replaces_the_verdict_of_its_scope_instead_of_adding_one() -> None:
    scoped = claim("v", subject="vllm-flashmla", scope=[{"library": "vllm", "last_affected": "0.19.1"}])
    first, _ = run([scoped], [engine_evidence("confirmed", "e1")])
    block = first[0].verification
    assert [v["scope"] for v in block["verdicts"]] == [{"libraries": {"vllm": "0.19.1"}}]  # no sm: no GPU
    again = scoped.model_copy(update={"verification": type(scoped.verification).model_validate(block)})
    second, _ = run([again], [engine_evidence("contradicted", "e2")])
    verdicts = second[0].verification["verdicts"]
    assert len(verdicts) == 1 and verdicts[0]["status"] == "refuted" and verdicts[0]["evidence"] == ["e2"]


def test_earlier_evidence_judged_again_that_no_longer_says_so_is_dropped() -> None:
    """A record cited for a verdict and judged again now without it (its recorded grid read as its run wrote it,
    not as a later run replaced it: kbtool.probe.recorded) is no longer cited; one not judged again stays."""
    old = {"status": "verified", "evidence": ["e9", "e0", "e1"], "checked": "2026-11-01",
           "verdicts": [{"scope": {"sm": "sm90"}, "status": "verified", "evidence": ["e0", "e1"], "reason": "r"}]}
    ups, _ = run([claim("k", verification=old)],
                 [evidence([("k", "inconclusive")], id_="e0"), evidence([("k", "confirmed")], id_="e1")])
    (u,) = ups
    assert u.new_status == "verified"
    assert u.verification["evidence"] == ["e9", "e1"]
    assert [v["evidence"] for v in u.verification["verdicts"]] == [["e1"]]
