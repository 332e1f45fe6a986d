"""`kb show TOPIC`: the page reads like seed 001, statements carry their claims' status, refuted comes first."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from kbtool.model.topic import Topic
from kbtool.render.topic import render_topic
from tests.topic.helpers import claim, load, topic, tree
from tests.util import run_kb


def _page(tmp_path: Path, refuted: bool) -> str:
    t = topic("t", area="inference/research", title="Which kernel", bound_by="compute", workarounds=["pin it"],
              scales_with=["ctx"], notes="See [[s]].", cross_references=[{"group": "Hardware-dependent", "count": 5}],
              hardware_parameters=[{"parameter": "tmem-capacity", "effect": "needs TMEM", "values_for": ["b"]}],
              statements=[{"text": "FA-3 needs SM90", "claims": ["c1"]},
                          {"text": "FA-4 needs SM100", "claims": ["c2"]}])
    c2 = claim("c2", "refuted" if refuted else "verified", ["ev-1"])
    kb = load(tree(tmp_path, t, topic("s", external=True), claim("c1", "disputed"), c2))
    console = Console(record=True, width=200, color_system=None)
    rec = kb.get("t")
    assert isinstance(rec, Topic)
    render_topic(rec, kb, console)
    return console.export_text()


def test_refuted_claim_is_announced_at_the_top(tmp_path: Path) -> None:
    lines = _page(tmp_path, refuted=True).splitlines()
    assert lines[0] == "inference/research"
    assert lines[1].startswith("REFUTED: probes contradicted 1 of the 2 claims") and "c2" in lines[1]
    assert "ev-1" in lines[2]


def test_statements_carry_status_and_evidence(tmp_path: Path) -> None:
    page = _page(tmp_path, refuted=False)
    assert "REFUTED" not in page
    assert "[disputed] FA-3 needs SM90" in page
    assert "[verified] c2; evidence: ev-1" in page
    for part in ("Fields", "Hardware parameters", "Workarounds", "Notes", "Cross-references",
                 "[[s]] -> external stub", "Hardware-dependent (5)", "compute bound", "Derived verification"):
        assert part in page


def test_kb_show_renders_the_seed_topic() -> None:
    r = run_kb("show", "long-context-attention-kernel-matrix")
    assert r.code == 0, r.err
    assert "source states: verified medium · 0.82, updated 2026-10-05" in r.out
    assert "Statements" in r.out and "flashmla-kv-format-fp8-fp4-only" in r.out


def test_kb_show_other_kinds_still_work() -> None:
    r = run_kb("show", "fa2-requires-sm80")
    assert r.code == 0, r.err
    assert "fa2-requires-sm80" in r.out and "Statements" not in r.out
    r = run_kb("show", "no-such-record-xyz")
    assert r.code == 2 and "unknown record" in r.err
