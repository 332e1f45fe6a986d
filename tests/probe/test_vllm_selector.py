"""The vllm-selector probe's pure parts on its recorded grid (no vLLM, no GPU)."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool.probe import engine as engine_probe
from probes import vllm_selector as vs
from tests.util import ROOT

CC90 = ROOT / "tests" / "data" / "vllm" / "0.33.0" / "cc9.0.json.gz"
pytestmark = pytest.mark.skipif(not CC90.exists(), reason="no recorded vLLM 0.33.0 grid")


def points() -> list[dict[str, Any]]:
    return vs.rows(vs.load(CC90))


def claim(cid: str, requires: dict[str, Any], code: str = "HEAD_DIM", subject: str = "vllm-flashinfer",
          scope: str = "0.33.0") -> dict[str, Any]:
    return {"id": cid, "subject": subject, "effect": "reject", "when": {"var": "engine", "eq": "vllm"},
            "requires": requires, "reason": {"code": code, "message": "m"},
            "scope": [{"library": "vllm", "introduced": scope, "last_affected": scope}]}


def by_claim(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["claim"]: r for r in results}


def flashinfer_claims() -> list[dict[str, Any]]:
    return [c for c in vs.engine_claims() if c["subject"] == "vllm-flashinfer" and c["id"].endswith("-0.33.0")]


def test_the_recorded_claim_is_confirmed_and_the_seed_one_is_not() -> None:
    seed = claim("seed", {"var": "head_dim", "in": [64, 128, 256]})
    got = by_claim(vs.judge_grid([*flashinfer_claims(), seed], points(), "0.33.0"))
    right = got["vllm-flashinfer-head-size-0.33.0"]
    assert right["agree"] > 0 and not right["ran"] and not right["refused"]
    assert got["seed"]["ran"], "vLLM 0.33.0 accepts FLASHINFER head size 512, which the seed's claim refuses"
    assert {p["head_size"] for p in got["seed"]["ran"]} == {512}


def test_a_refusal_another_claim_explains_is_not_held_against_this_one() -> None:
    kv = claim("kv", {"var": "kv_dtype", "in": ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "nvfp4"]},
               code="KV_DTYPE")
    nvfp4 = claim("nvfp4-fa2", {"all": [{"var": "head_dim", "ne": 64}, {"var": "sinks", "eq": False}]},
                  code="KV_DTYPE")
    nvfp4["when"] = {"all": [{"var": "engine", "eq": "vllm"}, {"var": "kv_dtype", "eq": "nvfp4"}]}
    alone = by_claim(vs.judge_grid([kv], points(), "0.33.0"))["kv"]
    both = by_claim(vs.judge_grid([kv, nvfp4], points(), "0.33.0"))["kv"]
    assert alone["refused"] and not both["refused"]
    assert all(p["kv"] == "nvfp4" and (p["head_size"] == 64 or p["sink"]) for p, _ in alone["refused"])


def test_claims_outside_the_release_are_not_judged() -> None:
    old = claim("old", {"var": "head_dim", "in": [64, 128, 256]}, scope="0.19.1")
    assert vs.judge_grid([old], points(), "0.33.0") == []


def test_judge_gives_verdicts_in_the_evidence_shape() -> None:
    obs = [{"outcome": "OK", "metrics": {"raw": str(CC90)}}]
    verdicts = vs.judge(obs, {})
    ids = {v["claim"] for v in verdicts}
    assert "vllm-flashinfer-head-size-0.33.0" in ids and "vllm-flashinfer-head-size" not in ids
    v = next(v for v in verdicts if v["claim"] == "vllm-flashinfer-head-size-0.33.0")
    assert v["verdict"] == "confirmed" and v["scope"]["vllm"] == "0.33.0" and v["scope"]["cc"] == ["9.0"]


def test_engine_probes_need_no_gpu() -> None:
    assert not engine_probe.needs_gpu(vs.SPEC)
    env = engine_probe.environment({"gpu": None, "reason": "no GPU"}, python="/nonexistent/python")
    assert env["gpu"] == "no GPU (vllm not installed)" and env["libraries"] == {}
