from __future__ import annotations

import pytest

from kbtool.bench.runner import Attempt, execute, plan
from kbtool.measure import grid
from tests.util import run_kb

CFG = grid.Config("decode", 1, 512, 32, 8, 128, "bf16")
CFG2 = grid.Config("decode", 8, 512, 32, 8, 128, "bf16")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_BENCH_FAKE", "1")


def test_repeats_in_separate_workers_and_failure_classes(fake: None) -> None:
    attempts = [Attempt(CFG, "fake-fast"), Attempt(CFG2, "fake-fast"), Attempt(CFG, "fake-slow"),
                Attempt(CFG, "fake-refuse"), Attempt(CFG, "fake-crash"), Attempt(CFG2, "fake-crash"),
                Attempt(CFG, "fake-hang")]
    seen: list[str] = []
    stopped = execute(attempts, repeats=2, budget_s=300, first_timeout_s=8, timeout_s=8, progress=seen.append)
    assert stopped is None
    fast, fast2, slow, refuse, crash, crash2, hang = attempts
    assert fast.outcomes == ["OK", "OK"] and len(fast.samples) == 2 and fast2.outcome == "OK"
    assert slow.samples[0] == pytest.approx(1.5 * fast.samples[0])
    assert fast.metrics["dispatch"] == "match" and fast.kernels == ["fake-fast_kernel"]
    assert refuse.outcomes == ["UNSUPPORTED"]  # a refusal is not retried
    assert "does not support head_dim 128" in (refuse.message or "")
    assert crash.outcomes == ["ERROR"] and crash2.outcomes == ["ERROR"]  # each crash took only its own worker
    assert "worker crashed: SIGSEGV" in (crash.message or "")
    assert hang.outcomes == ["TIMEOUT"]
    assert any("fake-hang" in line and "TIMEOUT" in line for line in seen)


def test_budget_stops_new_work(fake: None) -> None:
    attempts = [Attempt(CFG, "fake-fast")]
    stopped = execute(attempts, repeats=3, budget_s=0)
    assert stopped is not None and "time budget" in stopped
    assert attempts[0].outcomes == []


def test_plan_skips_missing_backends_and_predicts_oom() -> None:
    g = grid.Grid("t", (grid.Config("prefill", 16, 8192, 16, 16, 128, "bf16"),), (CFG,))
    attempts, missing = plan(g, ["sdpa-math", "sdpa-flash", "fa3"], memory_bytes=40 * 2**30,
                             is_installed=lambda name: name != "fa3")
    assert missing == ["fa3"]
    by = {(a.config.phase, a.backend): a for a in attempts}
    assert by[("prefill", "sdpa-math")].outcome == "OOM_PREDICTED"
    assert by[("prefill", "sdpa-flash")].outcomes == []
    assert len(attempts) == 4


def test_run_without_gpu_says_so_and_exits_0() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present")
    except ImportError:
        pass
    res = run_kb("bench", "run", "--quick")
    assert res.code == 0
    assert res.out.startswith("kb bench run: no CUDA GPU here")


def test_warm_up_compiles_each_variant_once() -> None:
    from kbtool.bench.runner import _variant

    q = grid.quick()
    variants = {_variant(c) for c in q.configs()}
    # prefill causal / non-causal, decode eager / graphs: four compile variants for each JIT backend
    assert len(variants) == 4
