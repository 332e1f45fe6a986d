"""Probe: FlashAttention-3 as vLLM ships it (vllm-flash-attn, the FA-3 build inside the vllm wheel), on sm90.

Every case calls `flash_attn_varlen_func(..., fa_version=3)` of vllm/vllm_flash_attn/flash_attn_interface.py once,
forward only, and compares the output with an fp32 reference computed from the very (dequantized) inputs the
kernel read; a refusal is recorded with the library's message. Axes: q and KV dtypes (fp16, bf16, fp8 e4m3/e5m2,
mixed, fp4), the fp8 output dtype and descale shapes, head dims 64..512 and unequal QK/V pairs (the 192/128 MLA
prefill shape), GQA ratios, causal and sliding window, softcap, attention sinks (s_aux), paged KV with block sizes
1..512, varlen batches, split-KV (num_splits). The run says which library and release ran: `vllm-flash-attn-3` at
the vLLM release whose wheel it came from (vllm/KB_RELEASE). FA-3 runs only on sm90: elsewhere nothing runs and
the claims are untestable there.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import PROBE_FAULT, Gate, default_reason, judge_gates, outcome_rows, values
from kbtool.probe.spec import ProbeSpec
from kbtool.probe.verdicts import untestable_here

LIB = "vllm-flash-attn-3"


SPEC = ProbeSpec(
    id="vllm-fa3",
    version=1,
    order=40,
    title="FA-3 (vLLM's fork) gates and features",
    claims=[
        "fa3-requires-sm90", "fa3-head-dims", "fa3-fp8-e4m3-forward-only", "fa3-fp8-head-dim-multiple-16",
        "fa3-fp8-output-bf16", "fa3-fp8-kv-needs-fp8-query", "fa3-no-fp4-kv", "fa3-sinks",
        "flash-attention-3-sliding-window", "vllm-fa3-sinks-bf16-max-64-heads", "vllm-fa3-paged-any-block-size",
        "fa3-num-splits-max-256",
    ],
    requires={"archs": ["sm90"], "packages": ["torch", LIB]},
    timeout_s=240,
    untestable=("FA-3 here is vLLM's build inside the vllm wheel (vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so), "
                "unpacked without vLLM by ../shared/gpu/fetch-wheels.sh --vllm-kernels 0.24.0; it loads only "
                "against the torch build that release pins (2.11, CUDA 13)."),
)


BASE: dict[str, Any] = {"dtype": "bf16", "kv_dtype": "bf16", "head_dim": 128, "head_dim_v": 128, "heads": [8, 2],
                        "causal": True, "window": [-1, -1], "softcap": 0.0, "sinks": False, "block": 0,
                        "lens_q": [128, 64], "lens_k": [384, 200], "num_splits": 0, "descale": "batch_kvheads"}


GQA = [[8, 8], [8, 1], [32, 4], [64, 8], [128, 8], [6, 4]]


_MESSAGES: tuple[tuple[str, str], ...] = (  # FA-3's own refusal strings (hopper/flash_api.cpp) -> reason codes
    ("head dimension at most", "HEAD_DIM"), ("headdim is different", "HEAD_DIM"), ("v headdim", "HEAD_DIM"),
    ("head_size should be a multiple", "HEAD_DIM"), ("head_size_v should be a multiple", "HEAD_DIM"),
    ("query and key must have the same dtype", "Q_DTYPE"), ("same dtype as query", "Q_DTYPE"),
    ("only supports fp16, bf16, and fp8_e4m3", "DTYPE"), ("output must have dtype", "OUT_DTYPE"),
    ("descale must have shape", "DESCALE"), ("s aux", "SINKS"), ("query heads <= 64", "SINKS"),
    ("num_splits > 256", "SPLITS"), ("number of heads in key/value must divide", "GQA"),
)


def reason_of(obs: dict[str, Any]) -> str | None:
    text = str(obs.get("message") or "").lower()
    for phrase, code in _MESSAGES:
        if phrase in text:
            return code
    if "unexpected keyword" in text or ("takes" in text and "positional" in text):
        return PROBE_FAULT
    return default_reason(obs)


def _hd_ok(p: dict[str, Any], mult: int = 8) -> bool:
    a, b = int(p["head_dim"]), int(p["head_dim_v"])
    if a > 256 or a % mult or b % mult:
        return False
    if a == b:
        return True
    return (128 < a <= 192 and 96 < b <= 128) or (a <= 64 and b <= 512)


def _plain(p: dict[str, Any]) -> bool:
    """A case that varies nothing but dtype and head dims (the default GQA, mask and layout)."""
    return (p["heads"] == BASE["heads"] and not p["sinks"] and not p["softcap"] and p["descale"] == "batch_kvheads"
            and not p.get("out_dtype") and p["window"] == [-1, -1] and p["causal"])


def _v_le_256(p: dict[str, Any]) -> bool:
    """head_dim_v above 256 has a rule of its own ("HeaddimV > 256 requires fp16 and bf16"), no claim's here."""
    return int(p["head_dim_v"]) <= 256


def _fp8(p: dict[str, Any]) -> bool:
    return str(p["dtype"]).startswith("fp8") or str(p["kv_dtype"]).startswith("fp8")


def gates(sm: str | None) -> list[Gate]:
    hopper = sm == "sm90"

    def head_dims(p: dict[str, Any]) -> bool | None:
        if not _plain(p) or p["dtype"] not in ("bf16", "fp16") or p["dtype"] != p["kv_dtype"]:
            return None
        return hopper and _hd_ok(p)

    def fp8_dtypes(p: dict[str, Any]) -> bool | None:
        if not _fp8(p) or not _plain(p) or p["dtype"] != p["kv_dtype"] or not _hd_ok(p, 16) or not _v_le_256(p):
            return None
        return hopper and p["kv_dtype"] == "fp8_e4m3"

    def fp8_mult16(p: dict[str, Any]) -> bool | None:
        if p["dtype"] != "fp8_e4m3" or p["kv_dtype"] != "fp8_e4m3" or not _plain(p) or not _hd_ok(p) \
                or not _v_le_256(p):
            return None
        return _hd_ok(p, 16)

    def fp8_query(p: dict[str, Any]) -> bool | None:
        if p["kv_dtype"] != "fp8_e4m3" or not _plain(p) or p["head_dim"] != 128 or p["head_dim_v"] != 128:
            return None
        return bool(p["dtype"] == "fp8_e4m3")

    def no_fp4(p: dict[str, Any]) -> bool | None:
        return False if p["kv_dtype"] == "fp4" else None

    def arch(p: dict[str, Any]) -> bool | None:
        return hopper if _plain(p) and p["dtype"] == p["kv_dtype"] == "bf16" and p["head_dim"] == 128 else None

    def sinks(p: dict[str, Any]) -> bool | None:
        return True if p["sinks"] and p["dtype"] == "bf16" and p["heads"][0] <= 64 else None

    def window(p: dict[str, Any]) -> bool | None:
        return True if p["window"][0] >= 0 else None

    def any_block(p: dict[str, Any]) -> bool | None:
        return True if p["block"] and not p["num_splits"] else None

    def splits(p: dict[str, Any]) -> bool | None:
        return p["num_splits"] <= 256 if p["num_splits"] else None

    def sink_heads(p: dict[str, Any]) -> bool | None:  # the fp16 cases pass an fp16 sink tensor: another gate
        return p["heads"][0] <= 64 if p["sinks"] and p["dtype"] != "fp16" else None

    return [Gate("fa3-requires-sm90", arch, "ARCH"), Gate("fa3-head-dims", head_dims, "HEAD_DIM"),
            Gate("fa3-fp8-e4m3-forward-only", fp8_dtypes, "DTYPE"),
            Gate("fa3-fp8-head-dim-multiple-16", fp8_mult16, "HEAD_DIM"),
            Gate("fa3-fp8-kv-needs-fp8-query", fp8_query, "Q_DTYPE"), Gate("fa3-no-fp4-kv", no_fp4, None),
            Gate("fa3-sinks", sinks, "SINKS"), Gate("flash-attention-3-sliding-window", window, "SLIDING_WINDOW"),
            Gate("vllm-fa3-sinks-bf16-max-64-heads", sink_heads, "SINKS"),
            Gate("vllm-fa3-paged-any-block-size", any_block, "BLOCK_SIZE"),
            Gate("fa3-num-splits-max-256", splits, "SPLITS")]


def _output_verdict(obs: list[dict[str, Any]], scope: dict[str, Any]) -> dict[str, Any]:
    """fa3-fp8-output-bf16: fp8 inputs give bf16 output; descales of shape (batch, num_heads_k) are taken and
    others refused."""
    def find(name: str) -> dict[str, Any] | None:
        return next((o for o in obs if (o.get("params") or {}).get("name") == name), None)

    base, other = find("dtype fp8_e4m3 hd128"), find("fp8 descale batch_qheads")
    if base is None or base.get("outcome") != "OK":
        return {"claim": "fa3-fp8-output-bf16", "verdict": "inconclusive", "scope": scope,
                "detail": "the fp8 hd128 case did not run"}
    got = (base.get("metrics") or {}).get("out_dtype")
    shape_refused = (other is not None and other.get("outcome") in ("UNSUPPORTED", "ERROR")
                     and reason_of(other) == "DESCALE")
    correct = (base.get("metrics") or {}).get("correct")
    said = (other or {}).get("message") or (other or {}).get("outcome")
    detail = (f"fp8 q/k/v gave {got} output (correct: {correct}); descales of shape (batch, num_heads_q) "
              f"{'refused' if shape_refused else 'not refused'}: {said}")
    ok = got == "bfloat16" and correct and shape_refused
    return {"claim": "fa3-fp8-output-bf16", "verdict": "confirmed" if ok else "contradicted" if got != "bfloat16"
            else "inconclusive", "scope": scope, "detail": detail}


def _label(p: dict[str, Any]) -> str:
    return str(p.get("name"))


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    sm = env.get("architecture")
    version = (env.get("libraries") or {}).get(LIB)
    gs = gates(sm)

    def scope_of(gate: Gate) -> dict[str, Any]:
        def picked(p: dict[str, Any]) -> bool:
            return gate.expect(p) is not None

        decode = all(set(p["lens_q"]) == {1} for p in (o.get("params") or {} for o in observations) if picked(p))
        return {"sm": sm, LIB: version, "phase": "decode" if decode and any(
                    picked(o.get("params") or {}) for o in observations) else "prefill",
                "dtypes": values(observations, "dtype", picked), "head_dims": values(observations, "head_dim", picked)}

    out = judge_gates(gs, observations, scope_of, _label, reason_of=reason_of)
    out.append(_output_verdict(observations, {"sm": sm, LIB: version, "dtypes": ["fp8_e4m3"]}))
    if sm != "sm90":
        untestable_here(out, SPEC.claims, f"vLLM's FA-3 build is compiled for sm90a only; {sm} runs none of it")
    return out


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    return {"outcomes": outcome_rows(observations, _label)}
