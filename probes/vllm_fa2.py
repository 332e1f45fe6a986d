"""Probe: FlashAttention-2 as vLLM ships it (vllm-flash-attn's FA-2 build, _vllm_fa2_C in the vllm wheel).

The same call and fp32 reference as probes/vllm_fa3.py, with fa_version=2: dtypes (fp16, bf16, fp8 KV), head dims
32..320, paged block sizes 8..512, sliding window, softcap, ALiBi, sinks and split-KV (which the wrapper refuses
for FA-2). FA-2 runs on sm80 and newer; the run says which release of the fork ran (vllm/KB_RELEASE).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import Gate, judge_gates, values
from kbtool.probe.spec import ProbeSpec
from probes import vllm_fa3

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

HEAD_DIMS = [32, 64, 80, 96, 128, 160, 192, 224, 256, 320]
BLOCKS = [8, 16, 32, 64, 128, 256, 512]


def _case(name: str, **over: Any) -> dict[str, Any]:
    return {**vllm_fa3.BASE, "fa_version": 2, "descale": "none", **over, "name": name}


def cases() -> list[dict[str, Any]]:
    """Features and block sizes first: on sm90 each new FA-2 kernel is compiled from PTX at first use (the wheel's
    FA-2 carries sm_80 code only), 5-16 s apiece, so a time budget cuts the dtype grid, not the gates."""
    out = [_case(f"paged b{b}", block=b, lens_q=[1, 1, 1], lens_k=[1000, 777, 64]) for b in BLOCKS]
    out += [_case("paged prefill b16", block=16, lens_q=[128, 17], lens_k=[700, 17])]
    out += [_case("window bf16", window=[63, 0]), _case("softcap bf16", softcap=30.0),
            _case("alibi bf16", alibi=True), _case("sinks bf16", sinks=True),
            _case("splits 4 bf16", num_splits=4, block=64, lens_q=[1, 1], lens_k=[8192, 5000]),
            _case("gqa 32:4 bf16", heads=[32, 4]), _case("varlen", lens_q=[1, 100, 257, 9],
                                                         lens_k=[1000, 100, 900, 4000])]
    out += [_case("dtype fp8_e4m3 hd128", dtype="fp8_e4m3", kv_dtype="fp8_e4m3"),
            _case("mixed q bf16 kv fp8", kv_dtype="fp8_e4m3", descale="batch_kvheads"),
            _case("pair 192/128 bf16", head_dim=192, head_dim_v=128)]
    out += [_case(f"dtype {d} hd{h}", dtype=d, kv_dtype=d, head_dim=h, head_dim_v=h)
            for d in ("fp16", "bf16") for h in HEAD_DIMS]
    return out


run = vllm_fa3.run
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
        return p["head_dim"] <= 256 and p["head_dim"] % 8 == 0

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
"""A case that ran a kernel no earlier case used and took longer than this: a driver JIT (FA-3's sm90a cases, whose
code is compiled in, take 3-20 ms each on the same host)."""


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
