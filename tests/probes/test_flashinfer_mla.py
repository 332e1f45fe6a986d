"""flashinfer-mla cases and their judge on synthetic observations (no GPU): what FlashInfer 0.7.4's MLA wrapper
does with each case on an H100 as its source reads (flashinfer/mla/_batch_mla/_backends/_fa_common.py
_validate_generated_fa_plan; _auto_policy.py tries fa3, then fa2, then the rest). Predictions come from the claims
as they stand in records/claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbtool.probe.commands import load_claims
from kbtool.probe.judges import flashinfer_mla as J
from kbtool.probe.rejudge import claim_context
from probes import flashinfer_mla as P

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = load_claims(ROOT / "records")
SM90 = {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "architecture": "sm90", "cuda": "12.9",
        "libraries": {"flashinfer": "0.7.4"}}
SM100 = {"gpu": "NVIDIA B200", "compute_capability": "10.0", "architecture": "sm100", "cuda": "12.9",
         "libraries": {"flashinfer": "0.7.4"}}


def judged(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["claim"]: v for v in P.judge(observations, {**env, "claims": claim_context(CLAIMS, P.SPEC.claims)})}


def ok(case: dict[str, Any], backend: str = "fa3") -> dict[str, Any]:
    return {"params": case, "outcome": "OK", "max_abs_err": 1e-3,
            "metrics": {"rel_err": 5e-3, "correct": True, "backend": backend}}


def refused(case: dict[str, Any], fa3: str, fa2: str) -> dict[str, Any]:
    return {"params": case, "outcome": "UNSUPPORTED",
            "message": f"_BackendPlanUnsupportedError: {J.NO_BACKEND}: fa3: {fa3}; fa2: {fa2}; trtllm-gen: trtllm-gen "
                       "MLA requires SM100/SM103/SM107, got compute capability SM90."}


MULTIPLE = ("{b} requires head_dim_ckv to be a multiple of 128 and head_dim_kpe to be a multiple of 64 (including "
            "zero).")


def as_the_source_reads_on_sm90() -> list[dict[str, Any]]:
    out = []
    for c in P.cases():
        ckv, kpe, q, kv = c["ckv"], c["kpe"], c["q_dtype"], c["kv_dtype"]
        if ckv % 128 or kpe % 64:
            out.append(refused(c, MULTIPLE.format(b="fa3"), MULTIPLE.format(b="fa2")))
        elif q == "fp8_e4m3":
            msg = "MLA q_data_type torch.float8_e4m3fn is not supported by the {b} backend."
            out.append(refused(c, msg.format(b="fa3"), msg.format(b="fa2")))
        elif kv != q and kv != "fp8_e4m3":
            msg = "{b} non-FP8 KV dtype must match query dtype, got torch.bfloat16 and torch.float16."
            out.append(refused(c, msg.format(b="fa3"), msg.format(b="fa2")))
        else:
            out.append(ok(c))
    return out


def test_the_cases_ask_deepseeks_call_and_one_off_each_gate() -> None:
    cases = P.cases()
    assert {"phase": "decode", "ckv": 512, "kpe": 64, "q_dtype": "bf16", "kv_dtype": "bf16", "page_size": 1} in cases
    assert {(c["ckv"], c["kpe"]) for c in cases} == set(P.DIMS) and {c["phase"] for c in cases} == {"decode", "prefill"}
    assert len(cases) == len({tuple(sorted(c.items())) for c in cases})


def test_the_reason_is_read_from_the_fa2_candidate() -> None:
    obs = as_the_source_reads_on_sm90()
    reasons = {J._label(o["params"]): J.reason_of(o) for o in obs if o["outcome"] == "UNSUPPORTED"}
    assert reasons["decode ckv 448 kpe 64 q/kv bf16/bf16"] == "HEAD_DIM"
    assert reasons["decode ckv 512 kpe 64 q/kv fp16/bf16"] == "KV_DTYPE"
    assert reasons["prefill ckv 512 kpe 64 q/kv fp8_e4m3/fp8_e4m3"] == "KV_DTYPE"


def test_the_claims_hold_where_the_source_says_so() -> None:
    v = judged(as_the_source_reads_on_sm90(), SM90)
    assert v["flashinfer-mla-latent-head-dims"]["verdict"] == "confirmed"
    assert v["flashinfer-mla-q-kv-dtypes"]["verdict"] == "confirmed"
    assert v["flashinfer-mla-requires-sm80"]["verdict"] == "confirmed"
    assert v["flashinfer-mla-q-kv-dtypes"]["scope"]["sm"] == "sm90"


def test_a_refused_case_the_claim_lets_through_contradicts_it() -> None:
    """If the H100 refused bf16 q with fp8 KV, which the dtype claim says SM90 takes, the claim is contradicted."""
    obs = as_the_source_reads_on_sm90()
    obs = [refused(o["params"], "FP8 kv_data_type for MLA requires x", "FP8 kv_data_type for MLA currently only "
                   "supports q_data_type=torch.bfloat16") if o["params"]["kv_dtype"] == "fp8_e4m3"
           and o["params"]["q_dtype"] == "bf16" else o for o in obs]
    assert judged(obs, SM90)["flashinfer-mla-q-kv-dtypes"]["verdict"] == "contradicted"


def test_on_blackwell_bf16_with_fp8_kv_is_predicted_refused() -> None:
    """On SM100 the claim says no backend takes a bf16 query with fp8 KV: a clean run there contradicts it."""
    obs = [ok(c, "trtllm-gen") for c in P.cases() if c["ckv"] == 512 and c["kpe"] == 64]
    assert judged(obs, SM100)["flashinfer-mla-q-kv-dtypes"]["verdict"] == "contradicted"
