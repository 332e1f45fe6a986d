"""The summary is worded in one module, from the Decision (kbtool/render/verdict.py): no code elsewhere makes or
edits it (no `.replace` on a summary anywhere, no assignment to one outside that module), and each case reads as
the data says."""

from __future__ import annotations

import ast
from pathlib import Path

from kbtool.render.verdict import summary
from kbtool.solve.decision import CASES, Decision

PKG = Path(__file__).resolve().parents[2] / "kbtool"
WORDER = PKG / "render" / "verdict.py"


def _offences(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace":
            target = ast.unparse(node.func.value)
            if "summary" in target or "verdict" in target:
                out.append(f"{path.name}:{node.lineno}: {target}.replace")
        if isinstance(node, ast.Assign | ast.AugAssign) and path != WORDER:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr == "summary":
                    out.append(f"{path.name}:{node.lineno}: assigns {ast.unparse(t)}")
    return out


def test_no_summary_is_edited_or_made_outside_the_wording_module() -> None:
    assert [o for p in sorted(PKG.rglob("*.py")) for o in _offences(p)] == []


def test_the_scan_sees_an_edit(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("a.summary = a.summary.replace(': yes', ': no')\n")
    assert len(_offences(bad)) == 2


def _d(case: str, **kw: object) -> Decision:
    base: dict[str, object] = {"where": "gpu x2", "phases": {"prefill": "ok", "decode": "ok"},
                               "use": {"prefill": "k1", "decode": "k2"}, "blocking": [], "caveats": [],
                               "memory": None, "detail": {}, "pick": None, "pool": None}
    base.update(kw)
    return Decision(case=case, **base)  # type: ignore[arg-type]


def test_every_case_has_its_verdict_and_words() -> None:
    mem = {"fits": True, "kv_bytes": 4.6e9, "available_bytes": 47.7e9, "weights_bytes": 1e9, "usable_bytes": 1e10,
           "capacity_bytes": 1e10, "utilization": 0.9, "max_ctx": 1000, "engine": None, "engine_error": None,
           "concurrency": None, "starts": None}
    assert summary(_d("YES", memory=mem)) == "gpu x2: yes (prefill: k1; decode: k2); KV 4.6 GB fits in 47.7 GB"
    d = _d("YES", caveats=["hardware"])
    assert d.verdict == "conditional" and summary(d) == "gpu x2: yes with hardware caveats (prefill: k1; decode: k2)"
    assert summary(_d("NO_KERNEL_COVERS", blocking=["decode"])) == "gpu x2: no kernel in the KB covers decode"
    refused = {**mem, "fits": False, "starts": False, "engine": "E 1.0", "engine_error": "it stops",
               "concurrency": 0.85}
    d = _d("POOL_REFUSES", memory=refused)
    assert d.verdict == "no"
    assert summary(d) == "gpu x2: E 1.0 would stop at start-up: it stops (maximum concurrency 0.85x)"
    assert {c: _d(c).verdict for c in ("HARDWARE", "NO_FIT", "DEPENDS")} == {
        "HARDWARE": "no", "NO_FIT": "no", "DEPENDS": "conditional"}
    assert set(CASES.values()) == {"yes", "no", "conditional", "unknown"}


def test_a_check_too_close_to_call_names_the_count_the_boundary_and_the_error() -> None:
    mem = {"fits": True, "starts": True, "engine": "E 1.0", "kv_bytes": 1e9, "available_bytes": 2e9}
    band = {"lowest": -0.013, "highest": 0.014, "boots": 4, "class": "hybrid", "vllm": "1.0"}
    d = _d("POOL_EDGE", memory=mem, detail={"edge": {"check": "max_num_seqs", "count": 1031, "boundary": 1024,
                                                     "ratio": 1.0068, "band": band}})
    assert d.verdict == "conditional"
    assert summary(d) == ("gpu x2: too close to call: by kb's count E 1.0 starts, with 1,031 cache blocks for "
                          "max_num_seqs 1,024, one per decode sequence; but kb was -1.3% to +1.4% off on 4 boots of "
                          "hybrid models on E 1.0")
    unbooted = {"lowest": -0.02, "highest": 0.02, "boots": 0, "vllm": "2.0"}
    d = _d("POOL_EDGE", memory={**mem, "starts": False},
           detail={"edge": {"check": "max_model_len", "count": 990, "boundary": 1000, "band": unbooted}})
    assert summary(d).endswith("E 1.0 would stop at start-up, with 990 KV blocks against 1,000 for one request of "
                               "the max length; but no boot of E 1.0 measures kb's error here, and the count is "
                               "within 2% of the boundary")
