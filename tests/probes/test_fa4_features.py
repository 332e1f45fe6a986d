"""fa4-arch v2: the sinks and sliding-window cases carry the variables fa4-sinks and flash-attention-4-sliding-window
read, and the judge gates only them (recorded v1 run plus synthetic v2 observations; no GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kbtool.probe.commands import load_claims
from kbtool.probe.rejudge import claim_context
from probes import fa4_arch as P

ROOT = Path(__file__).resolve().parents[2]
RECORD = yaml.safe_load((ROOT / "records/evidence/2026-11-30-nvidia-h200-sxm-fa4-arch.yaml").read_text())
ENV = {**RECORD["environment"], "claims": claim_context(load_claims(ROOT / "records"), P.SPEC.claims)}
OK = {"outcome": "OK", "metrics": {"correct": True, "rel_err": 0.004}}


def verdicts(cases: list[dict[str, Any]]) -> dict[str, str]:
    return {v["claim"]: v["verdict"] for v in P.judge(cases, ENV)}


def test_v1_record_leaves_the_feature_claims_untested() -> None:
    got = verdicts(RECORD["cases"])
    assert got["fa4-sinks"] == got["flash-attention-4-sliding-window"] == "inconclusive"
    assert got["fa4-head-dims"] == "confirmed"


def test_feature_cases_decide_the_feature_claims() -> None:
    extra = [{"params": f, **OK} for f in P.FEATURES]
    assert [f.get("sinks") for f in P.FEATURES] == [True, False]
    assert [f.get("sliding_window") for f in P.FEATURES] == [0, P.WINDOW]
    got = verdicts(RECORD["cases"] + extra)
    assert got["fa4-sinks"] == got["flash-attention-4-sliding-window"] == "confirmed"
    assert got["fa4-head-dims"] == "confirmed"
    refused = [{"params": P.FEATURES[0], "outcome": "UNSUPPORTED", "message": "AssertionError: sinks unsupported"},
               {"params": P.FEATURES[1], "outcome": "OK", "metrics": {"correct": False}}]
    got = verdicts(RECORD["cases"] + refused)
    assert got["fa4-sinks"] == "contradicted"  # a supports claim refused for its own reason (SINKS)
    assert got["flash-attention-4-sliding-window"] == "inconclusive"  # a wrong result is no clear answer


def test_v3_input_dtype_cases_judge_fa4_dtypes() -> None:
    dtype_gate = "AssertionError: inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2"
    refused = [{"params": dict(c), "outcome": "UNSUPPORTED", "message": dtype_gate} for c in P.INPUT_DTYPES]
    assert verdicts(RECORD["cases"] + refused)["fa4-dtypes"] == "confirmed"
    ran = [{"params": dict(c), **OK} for c in P.INPUT_DTYPES]
    assert verdicts(RECORD["cases"] + ran)["fa4-dtypes"] == "contradicted"


def test_the_fp8_query_caveat_is_untestable_off_blackwell() -> None:
    got = {v["claim"]: v for v in P.judge(RECORD["cases"], ENV)}
    assert "untestable on this architecture" in got["fa4-fp8-kv-needs-fp8-query"]["detail"]
    on_b200 = {v["claim"]: v for v in P.judge(RECORD["cases"], {**ENV, "architecture": "sm100"})}
    assert "untestable on this architecture" not in on_b200["fa4-fp8-kv-needs-fp8-query"]["detail"]
