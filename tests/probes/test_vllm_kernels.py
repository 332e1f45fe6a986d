"""The judges of the probes of vLLM's kernel builds, on the H200 runs recorded in records/evidence and on made-up
observations that must flip their verdicts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from kbtool.probe.judges import vllm_fa3_fp8_accuracy as fp8_acc_judge
from probes import vllm_fa2, vllm_fa3, vllm_fa3_fp8_accuracy, vllm_flashmla
from tests.util import ROOT

EVIDENCE = ROOT / "records" / "evidence"


def recorded(name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    ev = yaml.safe_load((EVIDENCE / name).read_text(encoding="utf-8"))
    obs = [{"params": c["params"], "outcome": c["outcome"], "message": c.get("message"),
            "seconds": c.get("seconds"), "metrics": c.get("metrics") or {}} for c in ev["cases"]]
    return obs, {**ev["environment"], "claims": {}}


def verdicts(mod: Any, obs: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, str]:
    return {v["claim"]: v["verdict"] for v in mod.judge(obs, env)}


def test_fa3_run_confirms_the_gates_it_exercises() -> None:
    obs, env = recorded("2026-12-01-nvidia-h200-sxm-vllm-fa3-2.yaml")
    got = verdicts(vllm_fa3, obs, env)
    for claim in ("fa3-head-dims", "fa3-fp8-e4m3-forward-only", "fa3-fp8-kv-needs-fp8-query", "fa3-no-fp4-kv",
                  "fa3-sinks", "vllm-fa3-sinks-bf16-max-64-heads", "vllm-fa3-paged-any-block-size",
                  "fa3-num-splits-max-256", "fa3-fp8-output-bf16"):
        assert got[claim] == "confirmed", claim


def test_fa3_head_dim_claim_is_contradicted_when_hd320_runs() -> None:
    obs, env = recorded("2026-12-01-nvidia-h200-sxm-vllm-fa3-2.yaml")
    obs = copy.deepcopy(obs)
    for o in obs:
        if o["params"]["name"] == "dtype bf16 hd320":
            o.update(outcome="OK", message=None, metrics={"correct": True, "rel_l2": 2e-3})
    assert verdicts(vllm_fa3, obs, env)["fa3-head-dims"] == "contradicted"


def test_fa3_off_hopper_is_untestable_there() -> None:
    _, env = recorded("2026-12-01-nvidia-h200-sxm-vllm-fa3-2.yaml")
    out = vllm_fa3.judge([], {**env, "architecture": "sm100"})
    assert all(v["verdict"] == "inconclusive" for v in out)
    assert any("untestable on this architecture" in v["detail"] for v in out)


def test_fa2_block_size_gate_and_first_use_jit() -> None:
    obs, env = recorded("2026-12-01-nvidia-h200-sxm-vllm-fa2-2.yaml")
    got = verdicts(vllm_fa2, obs, env)
    assert got["vllm-fa-fork-paged-block-size-16"] == "confirmed"
    assert got["vllm-fa2-sm80-code-jit-on-sm90"] == "confirmed"
    fast = [{**o, "seconds": 0.01} for o in obs]
    assert verdicts(vllm_fa2, fast, env)["vllm-fa2-sm80-code-jit-on-sm90"] == "inconclusive"


def test_flashmla_run_and_the_d_qk_512_abort() -> None:
    obs, env = recorded("2026-12-01-nvidia-h200-sxm-vllm-flashmla.yaml")
    got = verdicts(vllm_flashmla, obs, env)
    assert got["flashmla-dense-decode-d-qk-576-only-sm90"] == "confirmed"
    assert got["vllm-flashmla-dense-fp8-extension"] == "confirmed"
    assert got["flashmla-fp8-kv-bytes-per-token"] == "confirmed"
    ran = copy.deepcopy(obs)
    for o in ran:
        if o["params"]["path"] == "dense" and o["params"]["d_qk"] == 512:
            o.update(outcome="OK", message=None, metrics={"correct": True})
    assert verdicts(vllm_flashmla, ran, env)["flashmla-dense-decode-d-qk-576-only-sm90"] == "contradicted"


def test_fp8_accuracy_flat_curve_confirms_and_a_growing_one_contradicts() -> None:
    obs, env = recorded("2026-12-01-nvidia-h200-sxm-vllm-fa3-fp8-accuracy.yaml")
    got = verdicts(vllm_fa3_fp8_accuracy, obs, env)
    assert got == {fp8_acc_judge.CLAIM_SEED: "confirmed", fp8_acc_judge.CLAIM_FORK: "confirmed"}
    grown = copy.deepcopy(obs)
    for o in grown:
        p = o["params"]
        if p["path"] == "fp8" and p["head_dim"] == 128 and p["gqa"] == 1:
            o["metrics"]["total"]["rel_err"] = 2e-3 * (p["ctx"] / 4096)  # truncating accumulation grows with N
    got = verdicts(vllm_fa3_fp8_accuracy, grown, env)
    assert got[fp8_acc_judge.CLAIM_FORK] == "contradicted"
    short = [o for o in obs if o["params"]["ctx"] < 100_000]
    assert set(verdicts(vllm_fa3_fp8_accuracy, short, env).values()) == {"inconclusive"}


def test_every_probe_module_lists_claims_that_exist() -> None:
    for mod in (vllm_fa2, vllm_fa3, vllm_fa3_fp8_accuracy, vllm_flashmla):
        for claim in mod.SPEC.claims:
            assert (Path(ROOT) / "records" / "claims" / f"{claim}.yaml").is_file(), claim
