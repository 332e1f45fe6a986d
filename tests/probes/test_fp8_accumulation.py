"""The FP8-accumulation probe's numerics model and judge, on recorded and synthetic observations (no GPU)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbtool.probe.judges import fp8_accumulation as PJ
from probes import fp8_accumulation as P

EVIDENCE = Path(__file__).resolve().parents[2] / "records/evidence/2026-11-30-nvidia-h200-sxm-fp8-accumulation.yaml"
ENV = {"architecture": "sm90", "gpu": "NVIDIA H200", "libraries": {"flashinfer": "0.6.18"}}


def recorded() -> list[dict[str, Any]]:
    return list(yaml.safe_load(EVIDENCE.read_text())["cases"])


def verdicts(cases: list[dict[str, Any]]) -> dict[str, str]:
    return {v["claim"]: v["verdict"] for v in P.judge(cases, ENV)}


def test_e4m3_grid() -> None:
    assert P.e4m3(0.3) == 0.3125
    assert P.e4m3(1e-3) == 2.0**-9  # subnormal step
    assert P.e4m3(1e-4) == 0.0  # underflow
    assert P.e4m3(1000.0) == 448.0 and P.e4m3(-1000.0) == -448.0


def test_truncation_models_lose_mass_with_a_common_component() -> None:
    short = [[0.3] * 32 for _ in range(16)]
    long = [[0.3] * 32 for _ in range(1024)]
    exact_s, exact_l = 0.3 * 32 * 16, 0.3 * 32 * 1024
    rel_s = (P.accumulate_products(short) - exact_s) / exact_s
    rel_l = (P.accumulate_products(long) - exact_l) / exact_l
    assert rel_l < rel_s <= 0 and rel_l < -1e-3  # negative bias that grows with the length
    promoted = P.accumulate([9.6] * 1024, interval=1)
    assert abs(promoted - exact_l) / exact_l < abs(P.accumulate([9.6] * 1024, None) - exact_l) / exact_l + 1e-12


def test_recorded_run_confirms_mechanism_and_flashinfer() -> None:
    v = verdicts(recorded())
    assert v[PJ.CLAIM_HW] == "confirmed"
    assert v[PJ.CLAIM_FI] == "confirmed"
    assert v[PJ.CLAIM_FA3] == "inconclusive"  # FA-3 did not run


def _flatten(cases: list[dict[str, Any]], err: float, retrieval: float) -> list[dict[str, Any]]:
    out = copy.deepcopy(cases)
    for c in out:
        m = c.get("metrics", {})
        if c["params"].get("path") == "switch":
            m["variants"]["wgmma_inplace"]["acc"]["rel_err"] = err
            m["variants"]["wgmma_inplace"]["retrieval"] = retrieval
        if c["params"].get("path") == "flashinfer":
            m["total"]["rel_err"] = err
            m["retrieval"] = m["ref64_retrieval"]
    return out


def test_flat_small_errors_contradict() -> None:
    v = verdicts(_flatten(recorded(), 1e-4, 1.0))
    assert v[PJ.CLAIM_HW] == "contradicted"
    assert v[PJ.CLAIM_FI] == "contradicted"


def test_broken_switch_is_inconclusive() -> None:
    cases = recorded()
    for c in cases:
        if c["params"].get("path") == "switch":
            c["metrics"]["selfcheck_promote1_acc_err"] = 0.5
    assert verdicts(cases)[PJ.CLAIM_HW] == "inconclusive"
    cases = [c for c in recorded() if c["params"].get("path") != "codegen"]
    assert verdicts(cases)[PJ.CLAIM_HW] == "inconclusive"


@pytest.mark.parametrize("installed", [{"flashinfer": False, "fa3": False}, {"flashinfer": True, "fa3": True}])
def test_cases_follow_installed_packages(installed: dict[str, bool]) -> None:
    paths = {c["path"] for c in P.cases(installed)}
    assert ("fa3" in paths) == installed["fa3"] and ("flashinfer" in paths) == installed["flashinfer"]
    assert {"codegen", "switch", "bf16"} <= paths


def test_summarize_has_curves_per_path() -> None:
    data = P.summarize(recorded(), ENV)
    assert {"switch:wgmma_inplace", "switch:wgmma_promote_4", "flashinfer", "bf16"} <= set(data["curves"])
    assert [p["ctx"] for p in data["curves"]["flashinfer"]] == P.CONTEXTS
