"""Probe: FlashAttention-2 as vLLM ships it (vllm-flash-attn's FA-2 build, _vllm_fa2_C in the vllm wheel).

The same call and fp32 reference as probes/vllm_fa3.py, with fa_version=2: dtypes (fp16, bf16, fp8 KV), head dims
32..320, paged block sizes 8..512, sliding window, softcap, ALiBi, sinks and split-KV (which the wrapper refuses
for FA-2). FA-2 runs on sm80 and newer; the run says which release of the fork ran (vllm/KB_RELEASE).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges import vllm_fa3
from kbtool.probe.judging import Gate, judge_gates, values
from kbtool.probe.spec import ProbeSpec

LIB = "vllm-flash-attn-2"


SPEC = ProbeSpec(
    id="vllm-fa2",
    version=1,
    order=42,
    title="FA-2 (vLLM's fork) gates and features",
    claims=["fa2-requires-sm80", "fa2-head-dim-max-256", "fa2-dtypes-fp16-bf16", "fa2-no-sinks",
            "flash-attention-2-sliding-window", "vllm-fa-fork-paged-block-size-16", "vllm-fa2-sm80-code-jit-on-sm90"],
    requires={"archs": None, "packages": ["torch", LIB]},
    timeout_s=240,
    untestable=("FA-2 here is vLLM's build inside the vllm wheel (vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so, 54 MB "
                "compressed), unpacked without vLLM by ../shared/gpu/fetch-wheels.sh --vllm-kernels 0.24.0 "
                "--with-fa2 and carried in a call of its own; it loads only against torch 2.11 with CUDA 13."),
)


reason_of = vllm_fa3.reason_of


def _plain(p: dict[str, Any]) -> bool:
    return (p["heads"] == vllm_fa3.BASE["heads"] and not p["sinks"] and not p["softcap"] and not p.get("alibi")
            and p["window"] == [-1, -1] and not p["block"] and not p["num_splits"])


def gates(cc: float) -> list[Gate]:
    def arch(p: dict[str, Any]) -> bool | None:
        return cc >= 8.0 if _plain(p) and p["dtype"] == p["kv_dtype"] == "bf16" and p["head_dim"] == 128 else None

    def head_dims(p: dict[str, Any]) -> bool | None:
        if not _plain(p) or p["dtype"] not in ("bf16", "fp16") or p["head_dim"] != p["head_dim_v"]:
            return None
        return bool(p["head_dim"] <= 256 and p["head_dim"] % 8 == 0)

    def dtypes(p: dict[str, Any]) -> bool | None:
        if not _plain(p) or p["head_dim"] != 128:
            return None
        return p["dtype"] in ("bf16", "fp16") and p["kv_dtype"] == p["dtype"]

    def sinks(p: dict[str, Any]) -> bool | None:
        return False if p["sinks"] else None

    def window(p: dict[str, Any]) -> bool | None:
        return True if p["window"][0] >= 0 else None

    def block(p: dict[str, Any]) -> bool | None:
        return p["block"] % 16 == 0 if p["block"] else None

    return [Gate("fa2-requires-sm80", arch, "ARCH"), Gate("fa2-head-dim-max-256", head_dims, "HEAD_DIM"),
            Gate("fa2-dtypes-fp16-bf16", dtypes, "DTYPE"), Gate("fa2-no-sinks", sinks, None),
            Gate("flash-attention-2-sliding-window", window, "SLIDING_WINDOW"),
            Gate("vllm-fa-fork-paged-block-size-16", block, "BLOCK_SIZE")]


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    sm = env.get("architecture")
    try:
        cc = float(env.get("compute_capability") or 0)
    except ValueError:
        cc = 0.0
    version = (env.get("libraries") or {}).get(LIB)

    def scope_of(gate: Gate) -> dict[str, Any]:
        picked = lambda p: gate.expect(p) is not None  # noqa: E731
        return {"sm": sm, LIB: version, "phase": "prefill",
                "dtypes": values(observations, "dtype", picked), "head_dims": values(observations, "head_dim", picked)}

    out = judge_gates(gates(cc), observations, scope_of, vllm_fa3._label, reason_of=reason_of)
    out.append(_first_use(observations, {"sm": sm, LIB: version}))
    return out


SLOW_FIRST_USE_S = 3.0


def _first_use(observations: list[dict[str, Any]], scope: dict[str, Any]) -> dict[str, Any]:
    """vllm-fa2-sm80-code-jit-on-sm90: on sm90, several cases that ran took seconds (a kernel compiled at first use)."""
    ran = [o for o in observations if o.get("outcome") == "OK"]
    slow = sorted(float(o.get("seconds") or 0) for o in ran if float(o.get("seconds") or 0) > SLOW_FIRST_USE_S)
    detail = (f"{len(slow)} of {len(ran)} cases that ran took over {SLOW_FIRST_USE_S:.0f} s "
              f"({', '.join(f'{s:.0f}' for s in slow)} s); the others took under that")
    hopper = scope.get("sm") == "sm90"
    verdict = "confirmed" if hopper and len(slow) >= 3 else "inconclusive"
    return {"claim": "vllm-fa2-sm80-code-jit-on-sm90", "verdict": verdict, "scope": scope, "detail": detail}


summarize = vllm_fa3.summarize
