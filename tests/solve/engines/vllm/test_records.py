"""vLLM's per-release planning and accounting lines live in the engine-release records (records/engine-releases,
`planning:` and `accounting:`), compiled into the query image by kbtool/solve/engines/vllm/records.py; planning.py
and pool.py keep only how a field is used (issue 43, deliver 2)."""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbtool.errors import KbError
from kbtool.query_cli import image
from kbtool.solve.engines.vllm import defaults as vd
from kbtool.solve.engines.vllm import planning as vllm_planning
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.engines.vllm import records as vrec
from tests.util import RECORDS, ROOT, run_kb

VLLM = ROOT / "kbtool" / "solve" / "engines" / "vllm"
SHIPPED = sorted((RECORDS / "engine-releases").glob("vllm-*.yaml"))
RELEASE = re.compile(r"\b\d+\.\d+\.\d+\b")


def _doc(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.mark.parametrize("field", vllm_planning.FIELDS)
def test_a_record_missing_a_planning_field_fails_validation_with_file_path_and_fix(tmp_path: Path,
                                                                                    field: str) -> None:
    src = RECORDS / "engine-releases" / "vllm-0.33.0.yaml"
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(f"  {field}: ") and i > next(
        j for j, x in enumerate(lines) if x.startswith("planning:")))
    end = at + 1
    while end < len(lines) and lines[end].startswith("      "):  # the fact's folded continuation lines
        end += 1
    bad = tmp_path / "vllm-0.33.0.yaml"
    bad.write_text("".join(lines[:at] + lines[end:]), encoding="utf-8")
    r = run_kb("validate", str(bad), "--kb", str(RECORDS))
    assert r.code == 1, r.out + r.err
    line = next(j for j, x in enumerate(lines) if x.startswith("planning:")) + 1
    assert f"vllm-0.33.0.yaml:{line} $.planning.{field}: missing required field '{field}'" in r.out, r.out
    assert f"fix: add '{field}' (" in r.out, r.out
    assert "Traceback" not in r.out + r.err


def _literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant in a module that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


@pytest.mark.parametrize("module", ["planning.py", "pool.py", "parallel.py"])
def test_planning_and_pool_hold_no_per_release_table(module: str) -> None:
    """No release-string literal outside docstrings, and no table of lines: each release's values are its
    record's."""
    path = VLLM / module
    found = [(n, s) for n, s in _literals(path) if RELEASE.search(s)]
    assert not found, f"{module} names releases outside its docstrings: {found}"
    source = path.read_text(encoding="utf-8")
    assert not re.search(r"^(PLANNING|ACCOUNTING)\s*=", source, re.M)
    assert not re.search(r"\b(Planning|Accounting)\(\s*\"", source)


def test_the_literal_scan_can_fail() -> None:
    """The scan above finds a release string in code (the shape the removed tables had)."""
    probe = ROOT / "tests" / "solve" / "engines" / "vllm" / "test_records.py"
    assert any(RELEASE.search(s) for _, s in _literals(probe))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_vllm_record_has_its_planning_line_sourced(path: Path) -> None:
    """Each shipped vLLM release has its own planning line; each value cites a source of the record; a value not
    read in that release's code (its source is the probe, not the release's code) says so in a note."""
    doc = _doc(path)
    plan = doc.get("planning") or {}
    assert set(plan) == set(vllm_planning.FIELDS), f"{path.name}: planning has {sorted(plan)}"
    for section in ("planning", "accounting", "parallel"):
        for name, fact in (doc.get(section) or {}).items():
            if fact.get("source") is None:
                assert fact.get("basis") == "unverified" and fact.get("note"), f"{path.name} {section}.{name}"
                continue
            src = doc["sources"][fact["source"]]
            if src["type"] == "source-code":
                assert src["repo"] == "vllm-project/vllm" and src["path"] and src["commit"] and src["line"]
            else:
                assert fact.get("note"), f"{path.name} {section}.{name}: not cited in the release's code, no note"


def test_the_image_carries_the_lines_of_the_records() -> None:
    """The query image's vLLM rows and the records tree's (what a caller with no image reads) are the same."""
    rows = vd.rows(image())
    assert {r: row["planning"] for r, row in rows.items()} == {r: row["planning"] for r, row in
                                                               vrec.recorded().items()}
    assert all(row["planning"] for row in rows.values())
    assert {r for r, row in rows.items() if row["accounting"]} == {"0.19.1", "0.21.0", "0.24.0", "0.25.0", "0.26.0",
                                                                   "0.28.0", "0.29.0", "0.33.0", "0.34.0"}


def test_hybrid_prefix_caching_is_the_records_defaults_one() -> None:
    """One place: the planning line reads the record's `defaults.hybrid_prefix_caching`."""
    rows = copy.deepcopy(vrec.recorded())
    was = vllm_planning.planning("0.33.0", rows).hybrid_prefix_caching
    value, where = rows["0.33.0"]["defaults"]["hybrid_prefix_caching"]
    rows["0.33.0"]["defaults"]["hybrid_prefix_caching"] = (not value, where)
    assert was is value and vllm_planning.planning("0.33.0", rows).hybrid_prefix_caching is (not value)


def test_a_record_value_changes_the_answer() -> None:
    """The planning and accounting a query reads are the records' values, not a copy kept in Python."""
    rows = copy.deepcopy(vrec.recorded())
    rows["0.33.0"]["planning"]["in_flight"] = ("batched", "edited")
    rows["0.33.0"]["accounting"]["graphs"] = ("none", "edited")
    assert vllm_planning.planning("0.33.0", rows).in_flight == "batched"
    assert vllm_planning.planning("0.33.0").in_flight == "batches"
    assert vllm_pool.accounting("0.33.1", rows).graphs == "none"
    assert vllm_pool.accounting("0.33.1").graphs == "all"
    assert vllm_pool.accounting("0.34.0", rows).graphs == "measured"  # its own line, not 0.33.0's


@pytest.mark.parametrize("release,planning,accounting", [
    ("0.34.1", "0.34.0", "0.34.0"),  # unrecorded: the newest line at or below it
    ("0.34.0", "0.34.0", "0.34.0"),  # its own accounting line (vllm-0.34.0.yaml `accounting:`), no longer 0.33.0's
    ("0.33.1", "0.33.0", "0.33.0"),
    ("0.30.0", "0.30.0", "0.29.0"),
    ("0.29.0", "0.29.0", "0.29.0"),  # its own line: the V2 runner's CUDA-graph estimate (below)
    ("0.28.0", "0.28.0", "0.28.0"),
    ("0.27.1", "0.27.1", "0.26.0"),  # recorded planning, borrowed accounting
    ("0.25.1", "0.25.1", "0.25.0"),  # a patch release: its own record and planning line, 0.25.0's accounting
    ("0.25.0", "0.25.0", "0.25.0"),
    ("0.24.0", "0.24.0", "0.24.0"),
    ("0.23.0", "0.23.0", "0.21.0"),
    ("0.21.0", "0.21.0", "0.21.0"),  # its own line: the V1 runner's CUDA-graph estimate now comes off (below)
    ("0.20.2", "0.20.0", "0.19.1"),
    ("0.10.0", "0.19.1", "0.19.1"),  # older than all: the oldest
    (None, "0.24.0", "0.24.0"),      # no release: the one kb's reserve was measured on
])
def test_which_line_a_release_takes(release: str | None, planning: str, accounting: str) -> None:
    assert vllm_planning.planning(release).release == planning
    assert vllm_pool.accounting(release).release == accounting
    assert vrec.measured(vrec.recorded()) == "0.24.0"


def test_the_v1_runner_subtracts_its_graph_estimate_from_0_21_0() -> None:
    """vLLM 0.19.1 defaults VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS to "0" and only logs the estimate; 0.21.0 turns it
    on (envs.py:1768-1770, "Enabled by default as of v0.21.0") and takes the V1 runner's estimate off the KV budget
    (v1/worker/gpu_worker.py:401-446), which its log says ("CUDA graph memory profiling is enabled (default since
    v0.21.0)", e.g. LMCache/LMCache#3430 on 0.21.0). kb sized 0.21.0-0.23.0 with 0.19.1's line, so their V1 answers
    kept the graphs in the pool."""
    for release in ("0.21.0", "0.22.1", "0.23.0"):
        acct = vllm_pool.accounting(release)
        assert acct.release == "0.21.0" and acct.graphs == "V1", release
        assert vllm_pool.graph_bytes(acct, "V1", False) > 0
        assert vllm_pool.graph_bytes(acct, "V2", False) == 0  # the V2 runner's estimate is 0 until 0.29.0
    assert vllm_pool.graph_bytes(vllm_pool.accounting("0.20.0"), "V1", False) == 0


def test_the_v2_runner_estimates_its_graphs_from_0_29_0() -> None:
    """vLLM 0.28.0's V2 runner returns 0 from profile_cudagraph_memory (v1/worker/gpu/model_runner.py:843-845); 0.29.0
    captures them on a throwaway pool and returns their memory (model_runner.py:896-898, gpu/cudagraph_utils.py:718),
    which v1/worker/gpu_worker.py:565-610 takes off the KV budget. So a V2-runner answer of 0.29.0-0.32.0 loses the
    graph estimate before the pool, where 0.28.0's does not (seen on eugr/spark-vllm-docker#396: vLLM 0.29.1rc1 logs
    the estimate for MiniMax-M2.7 on the V2 runner)."""
    for release in ("0.29.0", "0.30.0", "0.32.0"):
        acct = vllm_pool.accounting(release)
        assert acct.graphs == "all", release
        assert vllm_pool.graph_bytes(acct, "V2", False) > 0, release
        assert vllm_pool.graph_bytes(acct, "V2", True) == 0  # eager: no graphs
    old = vllm_pool.accounting("0.28.0")
    assert old.graphs == "V1" and vllm_pool.graph_bytes(old, "V2", False) == 0
    assert vllm_pool.graph_bytes(old, "V1", False) > 0
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    def pool(release: str) -> int:
        a = solve(image(), build_query(engine="vllm", vllm=release, gpu="h100", model="qwen3-8b", ctx="32k"))
        assert a.memory is not None
        return a.memory.available_bytes

    assert pool("0.29.0") < pool("0.28.0")  # the same dense model on the V2 runner: 0.29.0 takes the graphs off


def test_an_answer_names_the_release_whose_accounting_line_it_borrows() -> None:
    """0.27.1 has its own defaults and planning but no accounting section: the reserve is 0.26.0's line, and the
    engine report says so."""
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    assert vd.rows(image())["0.27.1"]["accounting"] is None
    a = solve(image(), build_query(engine="vllm", vllm="0.27.1", gpu="h100", model="qwen3-8b", ctx="32k"))
    r = a.memory.engine_report if a.memory else None
    assert r is not None and r["accounting"] == "0.26.0" and r["planning"] == "0.27.1"
    assert "estimated: vLLM 0.27.1's defaults, runner and planning, the reserve as vLLM 0.26.0's line sizes it" \
        in r["text"], r["text"]


def test_one_record_must_say_which_release_was_measured() -> None:
    rows = copy.deepcopy(vrec.recorded())
    rows["0.24.0"]["accounting"].pop("measured")
    with pytest.raises(KbError) as e:
        vllm_pool.accounting(None, rows)
    assert "accounting.measured" in str(e.value) and e.value.fix
    rows["0.24.0"]["accounting"]["measured"] = (True, "x")
    rows["0.33.0"]["accounting"]["measured"] = (True, "x")
    with pytest.raises(KbError):
        vllm_planning.planning(None, rows)


def test_a_line_missing_a_field_is_an_error_not_a_crash() -> None:
    rows = copy.deepcopy(vrec.recorded())
    del rows["0.33.0"]["planning"]["hint"]
    with pytest.raises(KbError) as e:
        vllm_planning.planning("0.33.0", rows)
    assert "hint" in str(e.value) and "vllm-0.33.0.yaml" in str(e.value.fix)


def test_a_tree_without_planning_lines_takes_the_records_trees() -> None:
    """A records tree whose vLLM records carry no `planning` (the tests' fixture tree) is answered with the lines
    of the records tree, as before the lines moved into records; a tree with them keeps its own."""
    rows = vd.rows(image(str(ROOT / "tests" / "data" / "kb_fixture")))
    assert rows and not any(row["planning"] for row in rows.values())
    assert vrec.lines(rows) is vrec.recorded()
    own = vd.rows(image())
    assert vrec.lines(own) is own
