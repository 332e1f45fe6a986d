"""'To fit' advice: every change offered, asked as its own query, fits; and a change that does not fit is not
offered (the Llama-8B-on-a-4090 case, where fp8 weights alone leave the 128K KV cache out)."""

from __future__ import annotations

import pytest

from kbtool.query_cli import image
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve

CASES = [
    dict(gpu="rtx4090", ctx="128k", model="llama-3.1-8b"),
    dict(gpu="h200", gpus=8, ctx="128k", kv="fp8", model="kimi-k2"),
    dict(gpu="h100", ctx="128k", model="llama-3.1-70b"),
    dict(gpu="a100", ctx="32k", batch=64, model="qwen3-32b"),
]


def with_change(base: dict, change: str) -> dict:
    q = dict(base)
    words = change.split()
    for flag, value in zip(words[::2], words[1::2], strict=True):
        key = {"--ctx": "ctx", "--batch": "batch", "--kv": "kv", "--weights": "weights", "--gpus": "gpus"}[flag]
        q[key] = int(value) if key in ("batch", "gpus") else value
    return q


@pytest.mark.parametrize("base", CASES, ids=[f"{c['model']}-{c['gpu']}" for c in CASES])
def test_every_change_offered_fits_when_asked(base: dict) -> None:
    a = solve(image(), build_query(**base))
    assert a.memory is not None and a.memory.fits is False, "the case must start out not fitting"
    offered = a.memory.to_fit
    assert offered, "something should fit each of these"
    for o in offered:
        b = solve(image(), build_query(**with_change(base, o["change"])))
        assert b.memory is not None and b.memory.fits is True, o["change"]
        assert b.memory.max_sequences == o["max_sequences"], o["change"]


def test_fp8_weights_alone_are_not_offered_where_they_do_not_fit() -> None:
    base = CASES[0]
    alone = solve(image(), build_query(**with_change(base, "--weights fp8")))
    assert alone.memory is not None and alone.memory.fits is False  # the premise: fp8 weights alone leave KV out
    a = solve(image(), build_query(**base))
    assert a.memory is not None
    assert "--weights fp8" not in [o["change"] for o in a.memory.to_fit]
