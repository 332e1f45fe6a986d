"""`kb query` end to end: text output, exit codes, and a light import path."""

from __future__ import annotations

import subprocess
import sys

from tests.util import DATA, run_kb

FIX = str(DATA / "kb_fixture")


def test_text_output_has_verdict_kernels_memory_and_caveats() -> None:
    r = run_kb("query", "--kb", FIX, "--gpu", "hop", "--model", "fx-llama-70b", "--kv", "fp8", "--ctx", "128k",
               "--lib", "cuda=12.8")
    assert r.code == 0, r.err
    for part in ("verdict:", "use for prefill:", "memory:", "caveats:", "k-gqa-fp8-long-ctx"):
        assert part in r.out
    assert len(r.out.splitlines()) <= 25
    full = run_kb("query", "--kb", FIX, "--gpu", "hop", "--model", "fx-llama-70b", "--kv", "fp8", "--ctx", "128k",
                  "--lib", "cuda=12.8", "--explain")
    for part in ("kernels:", "KV/token", "source: seed fixture.txt"):
        assert part in full.out
    assert "more (--explain)" not in full.out


def test_explain_adds_sources_and_evidence() -> None:
    r = run_kb("query", "--kb", FIX, "--gpu", "hop", "--head-dim", "320", "--phase", "prefill", "--explain")
    assert "source: seed fixture.txt" in r.out and "evidence: ev-fixture" in r.out


def test_rows_without_gpu() -> None:
    r = run_kb("query", "--kb", FIX, "--ctx", "128k", "--kv", "fp8")
    assert r.code == 0 and "gpu-hopper" in r.out and "gpu-blackwell" in r.out


def test_no_is_exit_0_unless_fail_on_no() -> None:
    args = ["query", "--kb", FIX, "--gpu", "hop", "--model", "fx-llama-405b", "--ctx", "128k"]
    assert run_kb(*args).code == 0
    assert run_kb(*args, "--fail-on-no").code == 1


def test_query_path_does_not_import_heavy_modules() -> None:
    code = (
        "import sys; from pathlib import Path\n"
        "from kbtool.kb import load_kb\nfrom kbtool.solve.request import build_query\n"
        "from kbtool.solve.solver import solve\nfrom kbtool.render import query\n"
        f"solve(load_kb(Path({FIX!r}))[0], build_query(gpu='hop', ctx='128k'))\n"
        "bad = [m for m in ('jsonschema', 'networkx', 'ruamel') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
