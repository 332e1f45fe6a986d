"""SGLang's attention data parallelism on a serve line (kbtool/solve/engines/sglang/args.py attn_dp, pool.fit): the
width SGLang resolves (--attn-dp-size, or the deprecated --dp-size N --enable-dp-attention; 0.5.23
arg_groups/parallel_hook.py:39-61, 0.5.17 layers/dp_attention.py:320), the KV cell of one attention-TP rank
(tp // attn_dp heads: 0.5.23 model_executor/pool_configurator.py:356 and :492, 0.5.17 :197), and SGLang's refusals.
The attention weights each model replicates per group are not modelled, so such a line is answered conditional."""

from __future__ import annotations

import json

import pytest

from kbtool.query_cli import image
from kbtool.solve.engines.sglang import args as sglang_args
from kbtool.solve.engines.sglang import pool as sglang_pool
from tests.util import run_kb

LINE = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --tp 4"


@pytest.mark.parametrize("flags,width", [
    ("", 1),
    ("--dp-size 4", 1),  # replicas: each holds the whole model at tp 4
    ("--enable-dp-attention", 1),  # no --dp-size: width 1 in every recorded release (0.4.x made it tp_size)
    ("--dp-size 4 --enable-dp-attention", 4),  # the deprecated spelling: attn_dp_size 4, dp_size 1
    ("--dp 2 --enable-dp-attention", 2),
    ("--attn-dp-size 4", 4),
])
def test_the_attention_dp_width_is_sglangs(flags: str, width: int) -> None:
    assert sglang_args.attn_dp(sglang_args.parse(f"{LINE} {flags}").fields) == width


def test_the_cell_holds_one_attention_tp_ranks_heads() -> None:
    m = image().model("llama-3.1-70b")  # 8 KV heads x 128, 80 layers
    cap = 85_520_809_984
    plain, _, _ = sglang_pool.fit(m, "bf16", cap, 8192, mem_fraction_static=0.83, page_size=1, tp=4)
    dp4, _, _ = sglang_pool.fit(m, "bf16", cap, 8192, mem_fraction_static=0.83, page_size=1, tp=4, attn_dp=4)
    dp2, _, _ = sglang_pool.fit(m, "bf16", cap, 8192, mem_fraction_static=0.83, page_size=1, tp=4, attn_dp=2)
    assert plain.kv_bytes_per_token == 2 * 80 * 2 * 128 * 2  # 2 heads per rank of tp 4
    assert dp2.kv_bytes_per_token == 2 * 80 * 4 * 128 * 2  # attn_tp 2: 4 heads per rank
    assert dp4.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2  # attn_tp 1: all 8 heads on every rank
    assert dp4.weights_bytes == plain.weights_bytes  # the weight split is not modelled: the answer says so
    assert "attention DP 4" in dp4.formula and "attention DP" not in plain.formula
    mla = image().model("deepseek-v3")  # one latent per layer, replicated anyway
    a, _, _ = sglang_pool.fit(mla, "bf16", 150_754_820_096, 8192, mem_fraction_static=0.8, page_size=1, tp=8)
    b, _, _ = sglang_pool.fit(mla, "bf16", 150_754_820_096, 8192, mem_fraction_static=0.8, page_size=1, tp=8,
                              attn_dp=8)
    assert a.kv_bytes_per_token == b.kv_bytes_per_token == 576 * 61 * 2


def _ask(line: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    r = run_kb("query", "--json", "--gpu", "h100", "--sglang-args", line, env={"HF_HUB_OFFLINE": "1"})
    return r.code, (json.loads(r.out) if r.code == 0 else {}), r.err


@pytest.mark.parametrize("flags,named", [("--dp-size 4 --enable-dp-attention", "--enable-dp-attention"),
                                         ("--attn-dp-size 4", "--attn-dp-size")])
def test_attention_dp_sizes_the_kv_and_leaves_the_weights_conditional(flags: str, named: str) -> None:
    code, plain, _ = _ask(LINE)
    assert code == 0 and plain["verdict"] == "yes"
    code, a, _ = _ask(f"{LINE} {flags}")
    assert code == 0 and a["verdict"] == "conditional", a["summary"]
    assert named in a["query"]["ignored"] and f"sets {named} (attention weights replicated" in a["summary"]
    assert a["memory"]["kv_bytes_per_token"] == 4 * plain["memory"]["kv_bytes_per_token"]


def test_enable_dp_attention_without_a_dp_size_changes_nothing() -> None:
    code, plain, _ = _ask(LINE)
    code2, a, _ = _ask(f"{LINE} --enable-dp-attention")
    assert code == code2 == 0 and a["verdict"] == plain["verdict"] == "yes"
    assert a["memory"]["kv_bytes_per_token"] == plain["memory"]["kv_bytes_per_token"]
    assert "--enable-dp-attention" not in (a["query"].get("ignored") or [])


@pytest.mark.parametrize("flags,message", [
    ("--attn-dp-size 3", "tp_size 4 is not divisible by the attention-DP size 3"),
    ("--attn-dp-size 2 --dp-size 2", "--dp-size 2 with --attn-dp-size 2: SGLang refuses"),
])
def test_sglangs_own_refusals(flags: str, message: str) -> None:
    code, _, err = _ask(f"{LINE} {flags}")
    assert code == 2 and message in err and "\n  fix: " in err
