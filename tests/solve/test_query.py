"""Input parsing: --ctx, --kv, --lib, --phase, --engine, --util; bad values raise UsageError with a fix."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbtool.errors import UsageError
from kbtool.solve.query import parse_ctx, parse_kv, parse_libs, parse_phase, parse_util
from kbtool.solve.request import build_query


@pytest.mark.parametrize(("text", "want"), [
    ("131072", 131072), ("128k", 131072), ("128K", 131072), ("1m", 1048576), ("1M", 1048576), (" 32k ", 32768),
    ("0.5k", 512), ("1.5m", 1572864),
])
def test_ctx_forms(text: str, want: int) -> None:
    assert parse_ctx(text) == want


@pytest.mark.parametrize("text", ["0", "-5", "-1k", "1.3", "abc", "", "12kk", "1e5", "0k", "1g", "99999999999999"])
def test_ctx_rejects_with_accepted_form(text: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_ctx(text)
    assert "128k" in str(e.value)


@given(st.integers(1, 1 << 20))
def test_ctx_k_suffix_is_1024(n: int) -> None:
    assert parse_ctx(f"{n}k") == n * 1024 == parse_ctx(str(n * 1024))


@pytest.mark.parametrize(("text", "want"), [
    ("bf16", "bf16"), ("fp16", "fp16"), ("fp8", "fp8_e4m3"), ("FP8_E4M3", "fp8_e4m3"), ("fp8_e5m2", "fp8_e5m2"),
    ("fp4", "nvfp4"), ("nvfp4", "nvfp4"),
])
def test_kv_aliases(text: str, want: str) -> None:
    assert parse_kv(text) == want


@pytest.mark.parametrize("text", ["fp32", "int8", "x"])
def test_kv_bad(text: str) -> None:
    with pytest.raises(UsageError, match="unknown dtype") as e:
        parse_kv(text)
    assert e.value.fix and "fp8" in e.value.fix


def test_libs() -> None:
    assert parse_libs(["flashinfer=0.6.18", "CUDA=12.8", "flash_attn=2.8.3", "torch=v2.9.0"]) == {
        "flashinfer": "0.6.18", "cuda": "12.8", "flash-attn": "2.8.3", "torch": "2.9.0"}
    for bad in ["flashinfer", "flashinfer=", "=1.0", "flashinfer=abc"]:
        with pytest.raises(UsageError):
            parse_libs([bad])


def test_phase_util_and_build() -> None:
    assert parse_phase(None) == ["prefill", "decode"]
    assert parse_phase("decode") == ["decode"]
    with pytest.raises(UsageError):
        parse_phase("train")
    assert parse_util(None) == 0.9
    for bad in (0.0, 1.5, -1.0):
        with pytest.raises(UsageError):
            parse_util(bad)
    q = build_query(gpu="h100", ctx="128k", kv="fp8", kernel=["a,b", "c"], gpus=2)
    assert (q.ctx, q.kv, q.kernels, q.gpus) == (131072, "fp8_e4m3", ["a", "b", "c"], 2)
    for kw in ({"gpus": 0}, {"batch": -1}, {"head_dim": 0}, {"engine": "sglangx"}):
        with pytest.raises(UsageError):
            build_query(**kw)  # type: ignore[arg-type]


CTX_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmM]?)\s*$")


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(alphabet=" \t\u00a0.0123456789kKmMx-e+", max_size=12), st.text(max_size=8)))
def test_ctx_scanner_agrees_with_the_regex_it_replaced(text: str) -> None:
    from kbtool.solve.query import _ctx_parts

    m = CTX_RE.match(text)
    got = _ctx_parts(text)
    assert (got is None) == (m is None)
    if m is not None and got is not None:
        assert (float(got[0]), got[1]) == (float(m.group(1)), m.group(2).lower())
