"""Judges of the probes added for issue 20, on recorded observations and on synthetic ones (no GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kbtool.probe import commands
from kbtool.probe.commands import load_claims
from kbtool.probe.judges import triton_tutorial as tt_judge
from kbtool.probe.rejudge import claim_context
from probes import cudnn_frontend_sdpa, flex_attention, split_kv, triton_tutorial

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "records" / "evidence"
CLAIMS = load_claims(ROOT / "records")


def recorded(name: str) -> dict[str, Any]:
    return yaml.safe_load((EVIDENCE / f"2026-12-01-nvidia-h200-sxm-{name}.yaml").read_text(encoding="utf-8"))


def judge(probe: Any, record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    env = {**record["environment"], "claims": claim_context(CLAIMS, probe.SPEC.claims)}
    return {v["claim"]: v for v in probe.judge(record["cases"], env)}


def timed(batch: int, ctx: int, split: bool, ms: float, merge: bool, tc: bool = True) -> dict[str, Any]:
    return {"params": {"batch": batch, "ctx": ctx, "split": split, "tensor_cores": tc}, "outcome": "OK",
            "metrics": {"ms": ms, "merge_kernel": merge, "correct": True}}


def test_split_kv_needs_the_knob_to_take_effect() -> None:
    env = {"architecture": "sm90", "libraries": {"flashinfer": "0.6.18"}}
    same_kernels = [timed(1, n, s, 0.1, True) for n in split_kv.LENGTHS for s in (True, False)]
    got = {v["claim"]: v["verdict"] for v in split_kv.judge(same_kernels, env)}
    assert got == {split_kv.SPEC.claims[0]: "inconclusive", split_kv.SPEC.claims[1]: "inconclusive"}
    fast_split = [timed(1, n, True, 0.1, True) for n in split_kv.LENGTHS] + [
        timed(1, n, False, 0.1 * n / 8192, False) for n in split_kv.LENGTHS]
    assert split_kv.judge(fast_split, env)[0]["verdict"] == "confirmed"
    no_gain = [timed(1, n, s, 0.1, s) for n in split_kv.LENGTHS for s in (True, False)]
    assert split_kv.judge(no_gain, env)[0]["verdict"] == "contradicted"
    flat = [timed(32, n, s, 1.0, s) for n in split_kv.LENGTHS for s in (True, False)]
    assert split_kv.judge(flat, env)[1]["verdict"] == "confirmed"


def test_split_kv_recorded_run() -> None:
    got = judge(split_kv, recorded("split-kv"))
    needed = got["split-kv-needed-small-batch-long-context-decode"]
    assert needed["verdict"] == "confirmed" and "128K" in needed["detail"]
    assert got["split-kv-unneeded-batch-32"]["verdict"] == "inconclusive"  # the planner never split at batch 32


def test_flex_attention_recorded_run_takes_an_fp8_kv_cache() -> None:
    record = recorded("flex-attention")
    mixed = [c for c in record["cases"] if c["params"]["kv_dtype"] == "fp8_e4m3"]
    assert [c["outcome"] for c in mixed] == ["OK"] and mixed[0]["metrics"]["correct"] is True
    got = judge(flex_attention, record)
    assert got["flex-attention-dtypes"]["verdict"] == "contradicted"
    assert "q bf16 kv fp8_e4m3" in got["flex-attention-dtypes"]["detail"]


def test_cudnn_frontend_recorded_run() -> None:
    got = judge(cudnn_frontend_sdpa, recorded("cudnn-frontend-sdpa"))
    assert got["cudnn-frontend-sdpa-requires-sm80"]["verdict"] == "confirmed"
    assert "hd256/256" in got["cudnn-frontend-sdpa-head-dim"]["detail"]  # ran although the docs cap D at 128


def test_triton_tutorial_reads_only_its_own_head_dim_checks() -> None:
    echo = {"params": {}, "outcome": "ERROR", "message": "CompilationError: ... acc = tl.zeros([BLOCK_M, HEAD_DIM])"}
    assert tt_judge.reason_of(echo) is None  # kernel source echoed in a compile error names no gate
    assert tt_judge.reason_of({"metrics": {"traceback_tail": "assert HEAD_DIM_K in {16, 32}"}}) == "HEAD_DIM"
    got = judge(triton_tutorial, recorded("triton-tutorial"))
    assert got["triton-fused-attention-head-dims"]["verdict"] == "contradicted"
    assert "hd16" in got["triton-fused-attention-head-dims"]["detail"]


@pytest.mark.usefixtures("shipped_verdicts")
def test_apply_is_idempotent_and_counts_a_record_once(tmp_path: Path) -> None:
    """Applying the whole evidence folder (and one of its files again) to the claims as committed changes nothing."""
    files = [EVIDENCE, EVIDENCE / "2026-12-01-nvidia-h200-sxm-flashinfer-head-dim.yaml"]
    updates, _, written = commands.apply(ROOT / "records", files, write=False)
    assert written == []
    changed = [u.claim for u in updates if CLAIMS[u.claim][0].verification.model_dump(
        mode="json", exclude_defaults=True, by_alias=True) != {k: v for k, v in u.verification.items()
                                                               if not k.startswith("__")}]
    assert changed == []


def test_flex_attention_head_dim_caveat_needs_an_off_grid_case() -> None:
    record = recorded("flex-attention")  # v1: head dims 64 and 128 only
    assert judge(flex_attention, record)["flex-attention-head-dim-multiple-of-8"]["verdict"] == "inconclusive"
    ok = {"outcome": "OK", "metrics": {"correct": True}}
    fault = {"outcome": "ERROR", "message": "RuntimeError: CUDA error: misaligned address"}
    odd = [{"params": {"dtype": "bf16", "kv_dtype": "bf16", "head_dim": d}, **(fault if d % 8 else ok)}
           for d in flex_attention.ODD_HEAD_DIMS]
    faulted = judge(flex_attention, {**record, "cases": record["cases"] + odd})
    assert faulted["flex-attention-head-dim-multiple-of-8"]["verdict"] == "confirmed"
    clean = [{**c, **ok, "message": None} for c in odd]
    ran = judge(flex_attention, {**record, "cases": record["cases"] + clean})
    assert ran["flex-attention-head-dim-multiple-of-8"]["verdict"] == "contradicted"
    assert "hd46" in ran["flex-attention-head-dim-multiple-of-8"]["detail"]
    assert [c["head_dim"] for c in flex_attention.cases()][-4:] == [46, 44, 40, 72]
