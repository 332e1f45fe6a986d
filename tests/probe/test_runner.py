"""The runner isolates each case: crashes, hangs, OOM and bugs are recorded, and the run goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbtool.probe.commands import REPO_ROOT
from kbtool.probe.runner import run_cases
from kbtool.probe.spec import load_probe

FIXTURE = str(Path(__file__).parent / "fixtures" / "synthetic_probe.py")


@pytest.fixture(scope="module")
def results():  # type: ignore[no-untyped-def]
    probe = load_probe(FIXTURE)
    cases = probe.cases()
    for c in cases:
        if c["do"] == "hang":
            c["timeout_s"] = 3
    seen = []
    out = run_cases(probe, cases, root=REPO_ROOT, progress=seen.append)
    return out, seen


def by_do(results, do):  # type: ignore[no-untyped-def]
    return [r for r in results[0] if r.params["do"] == do]


def test_every_case_has_a_result_in_order(results) -> None:  # type: ignore[no-untyped-def]
    out, seen = results
    assert [r.index for r in out] == list(range(10))
    assert len(seen) == 10


def test_outcomes_are_classified(results) -> None:  # type: ignore[no-untyped-def]
    got = {r.params["do"]: r.outcome for r in results[0]}
    assert got == {"ok": "OK", "refuse": "UNSUPPORTED", "abort": "ERROR", "hang": "TIMEOUT", "memory": "OOM",
                   "raise": "ERROR", "noisy": "OK", "exit": "ERROR"}


def test_messages_are_kept(results) -> None:  # type: ignore[no-untyped-def]
    assert "head_dim 999 is not supported" in by_do(results, "refuse")[0].message
    assert "SIGABRT" in by_do(results, "abort")[0].message
    assert "MemoryError" in by_do(results, "memory")[0].message
    assert "status 3" in by_do(results, "exit")[0].message
    assert "KeyError" in by_do(results, "raise")[0].message


def test_a_crash_kills_only_its_worker(results) -> None:  # type: ignore[no-untyped-def]
    oks = by_do(results, "ok")
    pids = [r.metrics["pid"] for r in oks]
    assert all(r.outcome == "OK" for r in oks)
    assert len(set(pids)) == 3  # case 0, after the abort, after the exit: each a fresh worker


def test_a_worker_serves_several_cases() -> None:
    probe = load_probe(FIXTURE)
    out = run_cases(probe, [{"do": "ok"}, {"do": "refuse"}, {"do": "ok"}], root=REPO_ROOT)
    assert [r.outcome for r in out] == ["OK", "UNSUPPORTED", "OK"]
    assert out[0].metrics["pid"] == out[2].metrics["pid"]


def test_parallel_workers_keep_order() -> None:
    probe = load_probe(FIXTURE)
    cases = [{"do": d} for d in ("ok", "abort", "ok", "raise", "ok", "ok")]
    out = run_cases(probe, cases, root=REPO_ROOT, workers=3)
    assert [r.outcome for r in out] == ["OK", "ERROR", "OK", "ERROR", "OK", "OK"]


def test_no_case_starts_after_the_deadline() -> None:
    import time

    probe = load_probe(FIXTURE)
    out = run_cases(probe, [{"do": "ok"}, {"do": "ok"}], root=REPO_ROOT, deadline=time.monotonic() - 1)
    assert [r.outcome for r in out] == ["SKIPPED", "SKIPPED"]
    assert "time budget" in (out[0].message or "")
