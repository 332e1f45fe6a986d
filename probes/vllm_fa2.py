"""Probe: FlashAttention-2 as vLLM ships it (vllm-flash-attn's FA-2 build, _vllm_fa2_C in the vllm wheel).

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_fa2.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.vllm_fa2 import SPEC, judge, summarize
from probes import vllm_fa3

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


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


"""A case that ran a kernel no earlier case used and took longer than this: a driver JIT (FA-3's sm90a cases, whose
code is compiled in, take 3-20 ms each on the same host)."""
