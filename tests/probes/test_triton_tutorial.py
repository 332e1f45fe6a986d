"""triton-tutorial v2: compile errors read to their root cause, the retry order of tuning configs, and the judge
gating dtypes and hardware only where every configuration compiles (no GPU)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from kbtool.probe.commands import load_claims
from kbtool.probe.judges import triton_tutorial as PJ
from kbtool.probe.rejudge import claim_context
from probes import triton_tutorial as P

ROOT = Path(__file__).resolve().parents[2]
RECORD = yaml.safe_load((ROOT / "records/evidence/2026-12-01-nvidia-h200-sxm-triton-tutorial.yaml").read_text())
ENV = {**RECORD["environment"], "claims": claim_context(load_claims(ROOT / "records"), P.SPEC.claims)}


class CompilationError(Exception):
    """Stands in for triton.compiler.errors.CompilationError (the probe matches the type's name)."""


def chained(inner: Exception) -> Exception:
    try:
        try:
            raise inner
        except Exception as e:
            raise CompilationError("at 34:24:\n    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)") from e
    except CompilationError as outer:
        return outer


def test_compile_refusal_reads_the_root_cause_not_the_echoed_source() -> None:
    dtype = chained(ValueError("First input (fp16) and second input (bf16) must have the same dtype!"))
    got = P.compile_refusal(dtype)
    assert got is not None and got["outcome"] == "UNSUPPORTED" and got["metrics"]["gate"] == "DTYPE"
    assert "fp16" in got["message"] and "BLOCK_M" not in got["message"]
    assert P.compile_refusal(chained(RuntimeError("PassManager::run failed"))) is None
    assert P.compile_refusal(CompilationError("dtype = tl.float16")) is None  # no root cause: source text only
    assert P.compile_refusal(ValueError("dtype")) is None  # not a compile error


def test_spread_changes_the_tile_first() -> None:
    cfg = [SimpleNamespace(kwargs={"BLOCK_M": m, "BLOCK_N": n}, s=s) for m in (64, 128) for n in (32, 64)
           for s in (3, 4)]
    order = P.spread(cfg)
    assert [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) for c in order[:4]] == [(64, 32), (64, 64), (128, 32), (128, 64)]
    assert len(order) == len(cfg) and {id(c) for c in order} == {id(c) for c in cfg}


def observe(p: dict[str, Any]) -> dict[str, Any]:
    """The outcomes the tutorial's source predicts on sm90: head-dim refusals, fp16 and fp8 run, bf16 refused."""
    if p["head_dim"] == 16:
        return {"params": p, "outcome": "ERROR", "message": "CompileTimeAssertionFailure: ...",
                "metrics": {"traceback_tail": "tl.static_assert(BLOCK_N <= HEAD_DIM)"}}
    if p["head_dim"] not in PJ.COMPILED_HEAD_DIMS:
        return {"params": p, "outcome": "UNSUPPORTED", "message": "AssertionError:",
                "metrics": {"traceback_tail": "assert HEAD_DIM_K in {16, 32, 64, 128, 256}"}}
    if p["dtype"] == "bf16":
        return {"params": p, "outcome": "UNSUPPORTED", "message": "ValueError: must have the same dtype!",
                "metrics": {"gate": "DTYPE"}}
    return {"params": p, "outcome": "OK", "metrics": {"correct": True}}


def verdicts(obs: list[dict[str, Any]]) -> dict[str, str]:
    return {v["claim"]: v["verdict"] for v in P.judge(obs, ENV)}


def test_v2_outcomes_give_dtypes_and_hardware_verdicts() -> None:
    obs = [observe(c) for c in P.cases()]
    got = verdicts(obs)
    assert got["triton-fused-attention-dtypes"] == "confirmed"
    assert got["triton-fused-attention-hardware"] == "confirmed"
    assert got["triton-fused-attention-head-dims"] == "contradicted"  # hd16 is in its list but never compiles
    for o in obs:
        if o["params"]["dtype"] == "fp8_e5m2" and o["params"]["kv_dtype"] == "fp8_e5m2":
            o.update(outcome="ERROR", message="RuntimeError: PassManager::run failed", metrics={})
    got = verdicts(obs)
    assert got["triton-fused-attention-dtypes"] == "inconclusive"  # a crash is no answer about fp8
    assert got["triton-fused-attention-hardware"] == "confirmed"  # judged on fp16 only
    bf16 = next(o for o in obs if o["params"]["dtype"] == o["params"]["kv_dtype"] == "bf16")
    bf16.update(outcome="OK", message=None, metrics={"correct": True})
    assert verdicts(obs)["triton-fused-attention-dtypes"] == "contradicted"


def test_v1_record_still_judged() -> None:
    assert 1 in P.SPEC.rejudges
    got = verdicts(RECORD["cases"])
    assert got["triton-fused-attention-head-dims"] == "contradicted"
    assert got["triton-fused-attention-hardware"] == "confirmed"  # fp16 at 32-256 ran


def test_pytest_stand_in_keeps_decorated_functions(monkeypatch: Any, tmp_path: Path) -> None:
    import importlib.util
    import sys

    (tmp_path / "fused_attention_tutorial.py").write_text(
        "import pytest\n@pytest.mark.parametrize('x', [1])\ndef test_op(x):\n    return x\n"
        "@pytest.mark.skipif\ndef bench():\n    return 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pytest" else True)
    monkeypatch.delitem(sys.modules, "pytest")
    monkeypatch.delitem(sys.modules, "fused_attention_tutorial", raising=False)
    mod = P._import_tutorial()
    assert mod.test_op(3) == 3 and mod.bench() == 2
    monkeypatch.delitem(sys.modules, "fused_attention_tutorial")
