"""kbtool/solve/order.py: the order kernel-only answers try kernels in, per architecture (issue 45)."""

from __future__ import annotations

import pytest

from kbtool.query_cli import image
from kbtool.solve.order import _fa_default
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve


@pytest.mark.parametrize(("sm", "fa"), [("sm75", "flash-attention-2"), ("sm80", "flash-attention-2"),
                                        ("sm89", "flash-attention-2"), ("sm90", "flash-attention-3"),
                                        ("sm100", "flash-attention-4"), ("sm120", "flash-attention-4"),
                                        (None, "flash-attention-2")])
def test_the_flashattention_generation_of_each_architecture(sm: str | None, fa: str) -> None:
    assert _fa_default(sm) == fa


def test_turing_tries_sdpa_before_flashinfer_which_vllm_refuses_there() -> None:
    """vLLM 0.33.0 v1/attention/backends/flashinfer.py:696-703: FlashInfer is broken on SM75, floor raised to SM80."""
    a = solve(image(), build_query(gpu="t4"))
    assert a.recommended["decode"][:2] == ["torch-sdpa-efficient", "flashinfer-fa2"]
    fi = next(k for k in a.kernels if k.id == "flashinfer-fa2")
    assert any(r.claim == "flashinfer-sm75-broken-per-vllm" for r in fi.caveats)


def test_blackwell_puts_its_own_kernels_before_fa2_and_knows_trtllm_gen() -> None:
    a = solve(image(), build_query(gpu="b200"))
    for phase in ("prefill", "decode"):
        order = a.recommended[phase]
        assert order[0] == "flash-attention-4"
        assert order.index("flash-attention-2") > order.index("flashinfer-trtllm-gen")
    assert next(k for k in a.kernels if k.id == "flashinfer-trtllm-gen").status in ("ok", "caveat")


def test_ampere_keeps_fa2_first() -> None:
    a = solve(image(), build_query(gpu="a100", head_dim=128, kv="bf16", ctx="8k"))
    assert a.recommended["prefill"][0] == "flash-attention-2"


def test_flashinfer_decode_carries_no_split_kv_caveat() -> None:
    """FlashInfer's decode planner splits the KV sequence itself: the split-KV claim is its support, not a caveat."""
    a = solve(image(), build_query(gpu="h100", ctx="128k", phase="decode"))
    fi = next(k for k in a.kernels if k.id == "flashinfer-fa2")
    assert not any(r.claim == "split-kv-needed-small-batch-long-context-decode" for r in fi.caveats)


def test_a_decode_only_kernel_answers_for_decode_and_says_so() -> None:
    a = solve(image(), build_query(gpu="h100", ctx="32k", kernel=["flashmla-dense-decode"]))
    assert list(a.recommended) == ["decode"] and "decode" in a.assumed["phase"]
    assert "MLA" in a.assumed["model"]
