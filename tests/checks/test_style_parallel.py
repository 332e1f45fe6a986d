"""KB601 spread over worker processes reports exactly what one process reports."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbtool.checks import style
from kbtool.fmt import fast
from kbtool.kb import KB
from kbtool.store.records import load_tree
from tests.util import RECORDS


def test_parallel_matches_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kb = KB.from_load(load_tree(RECORDS))
    monkeypatch.setenv("KB_CACHE_DIR", "")  # no verdict cache: every file is checked
    monkeypatch.setattr(style, "PARALLEL_MIN", 1)
    monkeypatch.setattr(fast, "ENABLED", False)  # every file takes the ruamel round trip
    monkeypatch.setenv("KB_JOBS", "1")
    serial = style.find_non_canonical_files(kb)
    monkeypatch.setenv("KB_JOBS", "2")
    pids = tmp_path / "pids"
    real = style.first_difference

    def spy(*args: object) -> int:
        with pids.open("a") as f:  # the forked workers inherit this patch
            f.write(f"{os.getpid()}\n")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(style, "first_difference", spy)
    parallel = style.find_non_canonical_files(kb)
    assert parallel == serial
    workers = set(pids.read_text().split())
    assert len(workers) >= 2 and str(os.getpid()) not in workers  # the work really went to the workers
