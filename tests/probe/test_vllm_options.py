"""The vllm-options probe's judge on observation dicts shaped as its helper reports them (no vLLM, no GPU)."""

from __future__ import annotations

from typing import Any

from kbtool.probe import engine as engine_probe
from probes import vllm_options as vo


def observed(skip_outcome: str = "OK", control_outcome: str = "UNSUPPORTED",
             held: list[str] | None = None) -> list[dict[str, Any]]:
    skip, control, _heads, _fa = vo.cases()
    value = ["sliding_window"] if held is None else held
    return [
        {"params": skip, "outcome": skip_outcome, "message": None if skip_outcome == "OK" else "argparse exited 2",
         "metrics": {"vllm": "0.33.0", "parsed": skip_outcome == "OK",
                     "engine_args": {"kv_cache_dtype": "fp8", "kv_cache_dtype_skip_layers": value},
                     "cache_config": {"cache_dtype": "fp8", "kv_cache_dtype_skip_layers": value}}},
        {"params": control, "outcome": control_outcome, "message": "argparse exited 2",
         "metrics": {"vllm": "0.33.0", "parsed": control_outcome == "OK"}},
    ]


def verdict(obs: list[dict[str, Any]]) -> dict[str, Any]:
    (v,) = vo.judge(obs, {})
    assert v["claim"] == "kv-quant-skip-sliding-window-layers"
    return v


def test_the_cases_pass_the_flag_the_claim_names_and_a_control() -> None:
    skip, control, _heads, _fa = vo.cases()
    assert "--kv-cache-dtype-skip-layers" in skip["argv"] and "sliding_window" in skip["argv"]
    assert "--kv-cache-dtype-skip-layers" not in control["argv"]


def test_parsed_and_held_confirms_in_the_release_scope() -> None:
    v = verdict(observed())
    assert v["verdict"] == "confirmed" and v["scope"] == {"vllm": "0.33.0"}


def test_a_refused_flag_or_a_lost_pattern_contradicts() -> None:
    assert verdict(observed(skip_outcome="UNSUPPORTED"))["verdict"] == "contradicted"
    assert verdict(observed(held=[]))["verdict"] == "contradicted"


def test_a_parser_that_takes_anything_shows_nothing() -> None:
    assert verdict(observed(control_outcome="OK"))["verdict"] == "inconclusive"
    assert verdict(observed(skip_outcome="ERROR"))["verdict"] == "inconclusive"


def test_missing_cases_give_no_verdict_and_no_gpu_is_needed() -> None:
    assert vo.judge(observed()[:1], {}) == []
    assert not engine_probe.needs_gpu(vo.SPEC)


def heads(flashmla: list[int], flex: bool) -> dict[str, Any]:
    case = vo.cases()[2]
    return {"params": case, "outcome": "OK", "metrics": {"vllm": "0.19.1", "backends": {
        "FLASHMLA": {"class": "F", "supported": flashmla, "accepts": {}},
        "CUTLASS_MLA": {"error": "ImportError: no"},
        "FLEX_ATTENTION": {"class": "X", "supported": [], "accepts": {"36": flex, "100": flex}}}}}


def test_head_size_lists_decide_the_head_size_claims() -> None:
    got = {v["claim"]: v["verdict"] for v in vo.judge([heads([576], True)], {})}
    assert got == {"vllm-mla-head-size-576": "confirmed", "cutlass-mla-decode-head-dim-576": "inconclusive",
                   "vllm-flex-attention-head-size-alignment": "confirmed"}
    got = {v["claim"]: v["verdict"] for v in vo.judge([heads([320, 576], False)], {})}
    assert got["vllm-mla-head-size-576"] == "contradicted"
    assert got["vllm-flex-attention-head-size-alignment"] == "contradicted"


def fa(version: dict[str, int], alibi: int = 2) -> dict[str, Any]:
    return {"params": vo.cases()[3], "outcome": "OK",
            "metrics": {"vllm": "0.19.1", "cc": "10.0", "version": version, "alibi": alibi}}


def test_fa_versions_decide_the_fa4_fallback_claim() -> None:
    def one(obs: dict[str, Any]) -> str:
        (v,) = vo.judge([obs], {})
        assert v["claim"] == "vllm-flash-attn-fa4-large-head-falls-back-fa2"
        return str(v["verdict"])

    assert one(fa({"128": 4, "192": 4, "256": 2})) == "confirmed"
    assert one(fa({"128": 4, "192": 4, "256": 4})) == "contradicted"
    assert one(fa({"128": 4, "192": 4, "256": 2}, alibi=4)) == "contradicted"
    assert one(fa({"128": 2, "192": 2, "256": 2})) == "inconclusive"  # FA-4 is not the default: nothing shows
