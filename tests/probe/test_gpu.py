"""On a GPU: the SDPA probe runs two real cases through the runner (skipped without a GPU)."""

from __future__ import annotations

import pytest

from kbtool.probe.commands import REPO_ROOT
from kbtool.probe.runner import run_cases
from kbtool.probe.spec import load_probe


@pytest.mark.gpu
def test_sdpa_cases_on_this_gpu() -> None:
    probe = load_probe("probes.sdpa_gates")
    cases = [{"backend": "math", "head_dim": 64, "dtype": "fp32", "causal": False},
             {"backend": "flash", "head_dim": 512, "dtype": "bf16", "causal": False}]
    out = run_cases(probe, cases, root=REPO_ROOT)
    assert out[0].outcome == "OK" and out[0].metrics["correct"] is True
    assert out[1].outcome == "UNSUPPORTED" and "256" in (out[1].message or "")
