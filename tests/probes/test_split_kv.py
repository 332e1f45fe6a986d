"""split-kv v3 judge on the recorded v2 run plus forced-split observations (no GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from probes import split_kv as P

RECORDED = Path(__file__).resolve().parents[2] / "records/evidence/2026-12-01-nvidia-h200-sxm-split-kv.yaml"
ENV = {"architecture": "sm90", "libraries": {"flashinfer": "0.7.2.post1"}}


def recorded() -> list[dict[str, Any]]:
    return list(yaml.safe_load(RECORDED.read_text())["cases"])


def batch32(observations: list[dict[str, Any]]) -> dict[str, Any]:
    return {v["claim"]: v for v in P.judge(observations, ENV)}["split-kv-unneeded-batch-32"]


def forced(ms_of: dict[int, float], merged: bool = True) -> list[dict[str, Any]]:
    out = []
    for c in P.cases():
        if c.get("fixed_split_pages"):
            out.append({"params": c, "outcome": "OK",
                        "metrics": {"ms": ms_of[c["ctx"]], "rel_err": 3e-3, "correct": True, "merge_kernel": merged}})
    return out


def unsplit_tc_ms() -> dict[int, float]:
    return {o["params"]["ctx"]: o["metrics"]["ms"] for o in recorded()
            if o["params"]["batch"] == 32 and o["params"]["tensor_cores"] and not o["params"]["split"]}


def test_v3_keeps_every_v2_case() -> None:
    assert 2 in P.SPEC.rejudges
    for o in recorded():
        assert o["params"] in P.cases()
    assert {c["fixed_split_pages"] for c in P.cases() if c.get("fixed_split_pages")} == {
        n // P.PAGE // P.KV_CHUNKS for n in P.LENGTHS}


def test_v2_run_had_no_pair_at_batch_32_and_stays_inconclusive() -> None:
    got = batch32(recorded())
    assert got["verdict"] == "inconclusive" and "no timed pair" in got["detail"]


def test_forced_split_no_faster_confirms() -> None:
    base = unsplit_tc_ms()
    got = batch32(recorded() + forced({n: t * 1.02 for n, t in base.items()}))
    assert got["verdict"] == "confirmed", got


def test_forced_split_much_faster_contradicts() -> None:
    base = unsplit_tc_ms()
    got = batch32(recorded() + forced({n: t / 1.5 for n, t in base.items()}))
    assert got["verdict"] == "contradicted", got


def test_a_forced_plan_without_a_merge_kernel_does_not_count() -> None:
    base = unsplit_tc_ms()
    assert batch32(recorded() + forced(base, merged=False))["verdict"] == "inconclusive"
