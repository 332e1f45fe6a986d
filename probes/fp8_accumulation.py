"""Probe: FP8 attention accuracy at long context, with and without two-level accumulation (issue 7).

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/fp8_accumulation.py.
"""

from __future__ import annotations

import math
from typing import Any

from kbtool.probe.judges.fp8_accumulation import (
    A_MAX,
    A_MIN,
    CONTEXTS,
    HEAD_DIM,
    INTERVALS,
    MODULES,
    P_SCALE_FA3,
    QUERIES,
    SEED,
    SPEC,
    STEP_KEYS,
    judge,
    summarize,
)

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


PATHS = ["codegen", "switch", "flashinfer", "bf16", "fa3"]


def e4m3(x: float) -> float:
    """Round x to the nearest float8 e4m3fn value (ties to even, saturating at 448)."""
    if x != x:
        return x
    a = min(abs(x), 448.0)
    if a == 0.0:
        return 0.0
    e = max(math.floor(math.log2(a)), -6)  # below 2^-6 the grid is the subnormal one, step 2^-9
    q = 2.0 ** (e - 3)
    r = round(a / q) * q  # Python's round is ties-to-even
    return math.copysign(min(r, 448.0), x)


def truncate_mantissa(x: float, bits: int) -> float:
    """Keep `bits` explicit mantissa bits of x, dropping the rest toward zero."""
    if x == 0.0 or math.isinf(x) or x != x:
        return x
    m, e = math.frexp(x)  # x = m * 2^e, 0.5 <= |m| < 1
    return math.ldexp(math.trunc(m * 2.0 ** (bits + 1)) / 2.0 ** (bits + 1), e)


def accumulate(groups: list[float], interval: int | None, bits: int = 13) -> float:
    """Model of the tensor-core accumulation of one output element.

    `groups` are the exact sums of each 32-key step. The tensor-core accumulator keeps `bits` mantissa bits
    (13: the FP22 figure quoted for Hopper's FP8 MMA) and truncates; every `interval` steps (None: never) it
    is promoted into an exact FP32-like sum and restarted from zero.
    """
    acc, total = 0.0, 0.0
    for i, g in enumerate(groups, 1):
        acc = truncate_mantissa(acc + g, bits)
        if interval is not None and i % interval == 0:
            total += acc
            acc = 0.0
    return total + acc


def accumulate_products(steps: list[list[float]], bits: int = 14) -> float:
    """Model of one in-place accumulation in which every product is aligned before the add.

    Each step's products and the running accumulator are floored to the grid 2^(e - bits), e being the
    frexp exponent of the largest of them (sign-fill right shift keeps `bits` bits below the top one),
    then summed. This is the mechanism quoted from the DeepSeek-V3 report for Hopper FP8 MMA.
    """
    acc = 0.0
    for prods in steps:
        top = max([abs(acc), *(abs(x) for x in prods)])
        if top == 0.0:
            continue
        ulp = 2.0 ** (math.frexp(top)[1] - bits)
        acc = math.floor(acc / ulp) * ulp + sum(math.floor(x / ulp) * ulp for x in prods)
    return acc


def run(case: dict[str, Any]) -> dict[str, Any]:
    import importlib.util
    import pathlib

    spec = importlib.util.spec_from_file_location("_fp8_gpu", pathlib.Path(__file__).with_name("_fp8_gpu.py"))
    if spec is None or spec.loader is None:
        raise RuntimeError("probes/_fp8_gpu.py is missing")
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    return gpu.run_case(case, sys_consts())  # type: ignore[no-any-return]


def sys_consts() -> dict[str, Any]:
    return {
        "head_dim": HEAD_DIM,
        "queries": QUERIES,
        "a_min": A_MIN,
        "a_max": A_MAX,
        "seed": SEED,
        "p_scale": P_SCALE_FA3,
        "step_keys": STEP_KEYS,
        "intervals": INTERVALS,
    }


def cases(installed: dict[str, bool] | None = None) -> list[dict[str, Any]]:
    """Every case. A library path whose package is not installed here gets no cases; judge says so."""
    if installed is None:
        import importlib.util

        installed = {p: importlib.util.find_spec(m) is not None for p, m in MODULES.items()}
    out: list[dict[str, Any]] = [{"path": "codegen"}]
    for path in ("switch", "flashinfer", "bf16", "fa3"):
        if installed.get(path, True):
            out += [{"path": path, "ctx": n} for n in CONTEXTS]
    return out
