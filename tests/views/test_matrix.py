"""kb matrix: cell states on the fixture KB, Markdown and HTML shape, the CLI on the shipped KB."""

from __future__ import annotations

import json
import re

from kbtool.kb import KB
from kbtool.model import Accelerator, Kernel
from kbtool.views.matrix import STATES, matrix, to_html, to_markdown
from tests.util import DATA, run_kb

FIX = str(DATA / "kb_fixture")


def test_states_fixture(fx: KB) -> None:
    m = matrix(fx, kv="fp8", head_dim=128, phase="prefill")
    c = m["cells"]
    assert c["k-free"]["gpu-hopper"]["state"] == "ok"
    assert c["k-gqa"]["gpu-blackwell"]["state"] == "disputed"  # its only failing gate is disputed
    assert "k-gqa-requires-sm90" in {r["claim"] for r in c["k-gqa"]["gpu-blackwell"]["reasons"]}
    assert c["k-gqa"]["gpu-hopper"]["state"] == "caveat"  # cuda from the typical profile; fp8 may need care
    refuted = c["k-prefill"]["gpu-hopper"]
    assert refuted["state"] == "gate refuted" and refuted["status"] == "ok"
    assert refuted["reasons"][0]["claim"] == "k-prefill-no-fp8"
    assert matrix(fx, kv="bf16", head_dim=128)["cells"]["k-prefill"]["gpu-hopper"]["state"] == "ok"
    # a refuted gate does not hide a real rejection
    assert matrix(fx, kv="fp8", head_dim=512, phase="prefill")["cells"]["k-prefill"]["gpu-hopper"]["state"] \
        == "rejected"
    assert sum(m["counts"].values()) == 8 and set(m["counts"]) == set(STATES)


def test_markdown_and_html(fx: KB) -> None:
    m = matrix(fx, kv="fp8", head_dim=128)
    md = to_markdown(m)
    rows = [ln for ln in md.splitlines() if ln.startswith("| k-")]
    assert len(rows) == 4 and all(ln.count("|") == 4 for ln in rows)
    page = to_html(m)
    assert page.count('class="c"') == 8
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # no external assets
    assert "<script src" not in page and "@import" not in page and "url(" not in page
    assert 'title="k-prefill on gpu-hopper: gate refuted' in page and "k-prefill-no-fp8" in page
    for s in STATES:
        assert f"<b>{s}</b>" in page  # legend


def test_cli_matrix_shipped(shipped: KB, tmp_path: object) -> None:
    r = run_kb("matrix", "--json", "--kv", "fp8", "--head-dim", "256", "--phase", "decode")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    n_k, n_g = len(shipped.of_kind("kernel", Kernel)), len(shipped.of_kind("accelerator", Accelerator))
    assert len(d["kernels"]) == n_k and len(d["gpus"]) == n_g
    assert sum(d["counts"].values()) == n_k * n_g
    assert d["query"] == {"kv": "fp8_e4m3", "head_dim": 256, "phase": "decode", "attention": None}
    md = run_kb("matrix")
    assert md.code == 0 and "| flash-attention-4 |" in md.out and "gate refuted" in md.out
    bad = run_kb("matrix", "--kv", "fp7")
    assert bad.code == 2 and "unknown dtype" in bad.err
