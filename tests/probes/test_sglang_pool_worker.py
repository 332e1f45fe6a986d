"""probes/_sglang_pool.py without SGLang: each launch line's configurator and pool run under the environment its
resolution left (as a launch keeps it), the next line starts from the worker's own, and a recorded message never
names the worker's temporary model folder (issue 46). SGLang's pieces are stand-ins that read os.environ."""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

import pytest

from probes import _sglang_pool as W

VAR = "SGLANG_VLM_CACHE_SIZE_MB"  # what Qwen3-VL's resolution sets on a large Hopper GPU (0.5.20 qwen3_vl.py:96-98)


def _args(argv: list[str], root: Path) -> Any:
    """A stand-in for SGLang's ServerArgs: its resolution refuses, or sets what Qwen3-VL's sets."""

    def resolve() -> None:
        if "--refuse" in argv:
            raise ValueError(f"The repository {root}/nemotron-super contains custom code")
        if "--qwen3-vl" in argv:
            os.environ[VAR] = "0"

    return types.SimpleNamespace(resolve_once=resolve, resolved_dict=lambda: {"attention_backend": "fa3"})


def _resolver(root: Path) -> Any:
    parser = types.SimpleNamespace(parse_args=lambda argv: types.SimpleNamespace(argv=argv))
    server_args = types.SimpleNamespace(from_cli_args=lambda raw: _args(raw.argv, root))
    return types.SimpleNamespace(parser=parser, sa_mod=types.SimpleNamespace(ServerArgs=server_args))


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None]]:
    """What the configurator and each pool point read of VAR."""
    log: list[tuple[str, str | None]] = []

    def configurator(_sa: Any, _kcc: Any) -> tuple[Any, dict[str, Any]]:
        log.append(("configurator", os.environ.get(VAR)))
        return types.SimpleNamespace(), {"context_len": 4096}

    def pool(*_: Any) -> dict[str, Any]:
        log.append(("pool", os.environ.get(VAR)))
        os.environ["SET_BY_A_POINT"] = "1"  # a point's own change is gone at the next point
        return {"max_total_num_tokens": 1, "seen_by_point": os.environ.get("SET_BY_A_POINT")}

    monkeypatch.setattr(W, "_configurator", configurator)
    monkeypatch.setattr(W, "_pool", pool)
    monkeypatch.setattr(W, "_publish", lambda *_: None)
    monkeypatch.setattr(W, "_cell", lambda *_: {})
    monkeypatch.setattr(W.grid, "_graph", lambda *_: {})
    monkeypatch.delenv(VAR, raising=False)
    monkeypatch.delenv("SET_BY_A_POINT", raising=False)
    return log


def _row(argv: list[str], root: Path, base: dict[str, str]) -> list[Any]:
    spec = {"fractions": [0.1, 0.5, 0.9]}
    return W._row("nvidia-h100-sxm", "m", 0, argv, _resolver(root), None, None, spec, 70.0, root, base, {})


def test_pool_runs_under_the_resolutions_environment(seen: list[tuple[str, str | None]], tmp_path: Path) -> None:
    base = dict(os.environ)
    row = _row(["--qwen3-vl"], tmp_path, base)
    assert seen == [("configurator", "0")] + [("pool", "0")] * 3, "the old worker restored os.environ first"
    assert [p["seen_by_point"] for p in row[4]] == ["1"] * 3
    seen.clear()
    _row([], tmp_path, base)  # the next line starts from the worker's own environment
    assert seen == [("configurator", None)] + [("pool", None)] * 3
    assert VAR not in os.environ


def test_messages_do_not_name_the_temporary_folder(seen: list[tuple[str, str | None]], tmp_path: Path) -> None:
    root = tmp_path / "kb-sglang-pool-x1y2z3"
    row = _row(["--refuse"], root, dict(os.environ))
    message = row[3]["message"]
    assert str(root) not in message and str(tmp_path) not in message
    assert message == "The repository <models>/nemotron-super contains custom code"
    assert row[3]["error"] == "ValueError" and row[4] == []
    # the same line in another temporary folder records the same message
    other = _row(["--refuse"], tmp_path / "kb-sglang-pool-other", dict(os.environ))
    assert other[3] == row[3]


def test_the_pool_worker_starts_under_the_grid_workers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sglang-pool worker resolves its launch lines under the environment the sglang-resolve grid's workers
    get (probes/_sglang_grid.py WORKER_ENV): before issue 46 it lacked SGLANG_DISABLE_REQUEST_LOGGING and
    TOKENIZERS_PARALLELISM."""
    import subprocess

    from probes import _sglang_grid, sglang_pool, sglang_resolve

    seen: list[dict[str, str]] = []

    def run(cmd: list[str], **kw: Any) -> Any:
        seen.append(kw["env"])
        return types.SimpleNamespace(returncode=1, stderr="stopped by the test", stdout="")

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(sglang_pool, "accelerators", lambda ids: {})
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")  # the caller's value is replaced for both
    assert sglang_resolve.run({"platform": "sm90"})["outcome"] == "ERROR"
    assert sglang_pool.run({"group": "classes"})["outcome"] == "ERROR"
    grid_worker = dict(seen[0], **_sglang_grid.WORKER_ENV)  # the grid driver adds WORKER_ENV for its workers
    assert seen[1] == grid_worker
    assert seen[1]["SGLANG_DISABLE_REQUEST_LOGGING"] == "1" and seen[1]["TOKENIZERS_PARALLELISM"] == "false"
