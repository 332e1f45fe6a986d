"""sdpa-features: cases carry the claims' variables, and the judge reads sinks, window and workspace outcomes
(synthetic observations in the shape the probe records; no GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbtool.probe.commands import load_claims
from kbtool.probe.judges import sdpa_features as PJ
from kbtool.probe.rejudge import claim_context
from probes import sdpa_features as P

ROOT = Path(__file__).resolve().parents[2]
ENV = {"architecture": "sm90", "gpu": "NVIDIA H200", "compute_capability": "9.0", "torch": "2.11.0+cu130",
       "claims": claim_context(load_claims(ROOT / "records"), P.SPEC.claims)}
TYPE_ERROR = "TypeError: scaled_dot_product_attention() got an unexpected keyword argument 'sinks'"


def observe(params: dict[str, Any]) -> dict[str, Any]:
    """What torch 2.11 is expected to do, per the sources the claims cite."""
    kind, backend = params["kind"], params["backend"]
    if kind == "sinks":
        return {"params": params, "outcome": "UNSUPPORTED", "message": TYPE_ERROR,
                "metrics": {"exception": "TypeError", "gate": "SINKS", "schema_args": ["query", "key", "value"]}}
    if kind == "window" and backend == "flash":
        return {"params": params, "outcome": "UNSUPPORTED", "metrics": {"exception": "RuntimeError"},
                "message": "Flash Attention does not support non-null attn_mask. | RuntimeError: No available kernel."}
    if kind == "workspace" and not params["score_matrix_fits"]:
        need = params["score_matrix_bytes"]
        return {"params": params, "outcome": "OOM", "message": "OutOfMemoryError: Tried to allocate 1024.00 GiB",
                "metrics": {"tried_bytes": need // 2, "score_alloc": True}}
    return {"params": params, "outcome": "OK", "metrics": {"rel_err": 0.004, "correct": True}}


def verdicts(observations: list[dict[str, Any]]) -> dict[str, str]:
    return {v["claim"]: v["verdict"] for v in P.judge(observations, ENV)}


def test_cases_carry_the_variables_the_claims_read() -> None:
    cs = P.cases()
    assert {c["backend"] for c in cs if c["kind"] == "sinks"} == set(P.BACKENDS)
    assert all(c["sinks"] is True and c["sliding_window"] == 0 for c in cs if c["kind"] == "sinks")
    assert all(c["sliding_window"] == P.WINDOW and not c["sinks"] for c in cs if c["kind"] == "window")
    work = [c for c in cs if c["kind"] == "workspace"]
    assert [c["score_matrix_fits"] for c in work] == [True, False]
    assert work[1]["score_matrix_bytes"] == 64 * 65536**2 * 4 > 1e12


def test_expected_outcomes_confirm_every_claim() -> None:
    got = verdicts([observe(c) for c in P.cases()])
    assert got == {c: "confirmed" for c in P.SPEC.claims}


def test_a_sinks_argument_that_runs_contradicts_the_no_sinks_claims() -> None:
    obs = [observe(c) for c in P.cases()]
    for o in obs:
        if o["params"]["kind"] == "sinks" and o["params"]["backend"] == "efficient":
            o.update(outcome="OK", message=None, metrics={"correct": True, "keyword": "sinks"})
    got = verdicts(obs)
    assert got["torch-sdpa-efficient-no-sinks"] == "contradicted"
    assert got["torch-sdpa-flash-no-sinks"] == "confirmed"


def test_flash_taking_the_mask_or_efficient_refusing_it_contradicts() -> None:
    obs = [observe(c) for c in P.cases()]
    for o in obs:
        p = o["params"]
        if p["kind"] == "window" and p["backend"] == "flash":
            o.update(outcome="OK", message=None, metrics={"correct": True})
        if p["kind"] == "window" and p["backend"] == "efficient":
            o.update(outcome="UNSUPPORTED", message="Memory efficient attention requires attn_mask aligned")
    got = verdicts(obs)
    assert got["torch-sdpa-flash-no-sliding-window"] == "contradicted"
    assert got["torch-sdpa-efficient-sliding-window-via-mask"] == "contradicted"
    assert got["torch-sdpa-math-sliding-window-via-mask"] == "confirmed"


def test_workspace_needs_the_oom_on_the_score_matrix() -> None:
    obs = [observe(c) for c in P.cases()]
    big = next(o for o in obs if o["params"].get("score_matrix_fits") is False)
    big["metrics"]["score_alloc"] = False  # an OOM on something else says nothing about the score matrix
    assert verdicts(obs)["torch-sdpa-math-score-matrix-workspace"] == "inconclusive"
    big.update(outcome="OK", message=None, metrics={"peak_bytes": 10**12})  # ran although it cannot fit
    assert verdicts(obs)["torch-sdpa-math-score-matrix-workspace"] == "contradicted"
    premise = next(o for o in obs if o["params"].get("score_matrix_fits") is True)
    premise.update(outcome="ERROR", message="premise failed: score matrix ...")
    big.update(outcome="OOM", metrics={"score_alloc": True})
    assert verdicts(obs)["torch-sdpa-math-score-matrix-workspace"] == "inconclusive"


def test_helpers() -> None:
    assert P._tried_bytes("Tried to allocate 1024.00 GiB. GPU 0 has") == 1024 * 2**30
    assert P._tried_bytes("no size here") is None
    assert PJ.reason_of({"message": "Flash Attention does not support non-null attn_mask."}) == "SLIDING_WINDOW"
    assert PJ.reason_of({"message": TYPE_ERROR}) == "SINKS"
    assert PJ.reason_of({"message": "x", "metrics": {"gate": "WORKSPACE"}}) == "WORKSPACE"
