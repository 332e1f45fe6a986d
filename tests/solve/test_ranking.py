"""kb query ranks the kernels that pass every gate by latency measured on the queried GPU."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench import helpers as h
from tests.util import ROOT, run_kb


def _tree(tmp: Path, results: list) -> Path:
    """The bench tree plus the shipped claims: a kernel is ranked only where the KB knows it passes."""
    import shutil

    root = h.tree(tmp, results)
    for folder in ("claims", "evidence"):
        shutil.copytree(ROOT / "records" / folder, root / folder)
    return root

ROWS = [
    (h.decode(1, 16384), "flashinfer-decode", [700.0, 702.0, 699.0]),
    (h.decode(1, 16384), "sdpa-flash", [90.0, 90.5, 89.9]),
    (h.decode(1, 512), "flashinfer-decode", [70.0, 70.2, 70.1]),
    (h.decode(1, 512), "sdpa-flash", [71.0, 70.5, 71.3]),
]


def _query(root: Path, *extra: str) -> dict:
    r = run_kb("query", "--kb", str(root), "--gpu", "h200", "--kv", "bf16", "--head-dim", "128", "--batch", "1",
               "--phase", "decode", "--json", *extra)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_separated_winner_is_ranked_first_and_cited(tmp_path: Path) -> None:
    root = _tree(tmp_path, [h.result("nvidia-h200-sxm", ROWS)])
    a = _query(root, "--ctx", "16k")
    r = a["ranking"]["decode"]
    assert r["winner"] == "sdpa-flash" and r["verdict"] == "separated"
    assert [x["kernel"] for x in r["ranking"]] == ["torch-sdpa-flash", "flashinfer-fa2"]
    ranks = {k["id"]: k["rank"] for k in a["kernels"] if k["rank"]}
    assert ranks == {"torch-sdpa-flash": 1, "flashinfer-fa2": 2}
    assert "torch-sdpa-flash (sdpa-flash) fastest, a clear winner" in a["summary"]
    # each ranked backend cites its row of the run's one record: <record id>#<configuration key>-<backend>
    run, key = "2026-12-01-nvidia-h200-sxm-bench-test", "decode-b1-kv16384-h32-hkv8-d128-bf16-eager"
    assert r["measurements"] == [f"{run}#{key}-flashinfer-decode", f"{run}#{key}-sdpa-flash"]
    assert [x["measurement"] for x in r["ranking"]] == [f"{run}#{key}-sdpa-flash", f"{run}#{key}-flashinfer-decode"]


def test_no_clear_winner_is_said(tmp_path: Path) -> None:
    root = _tree(tmp_path, [h.result("nvidia-h200-sxm", ROWS)])
    a = _query(root, "--ctx", "512")
    assert a["ranking"]["decode"]["winner"] is None
    assert "no clear winner" in a["summary"]


def test_only_kernels_that_pass_are_ranked(tmp_path: Path) -> None:
    root = _tree(tmp_path, [h.result("nvidia-h200-sxm", ROWS)])
    a = _query(root, "--ctx", "16k", "--kernel", "flashinfer-fa2")
    assert [x["kernel"] for x in a["ranking"]["decode"]["ranking"]] == ["flashinfer-fa2"]


def test_no_measurements_no_ranking(tmp_path: Path) -> None:
    root = h.tree(tmp_path, [h.result("nvidia-h100-sxm", ROWS)])
    assert _query(root, "--ctx", "16k")["ranking"] is None
