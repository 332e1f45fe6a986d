"""A sparse-MLA model (an MLA layer with DeepSeek's indexer) is judged at the backend layer as sparse MLA, the layout
the engines choose its backends for (kbtool/solve/solver.py backend_layout: vLLM 0.34.0 builds the layers with
use_sparse from index_topk, model_executor/models/deepseek_v2.py:1138/:1210, and asks its selector with it,
layers/attention/mla_attention.py:533-539), while its kernels keep the MLA layout they compute. Before, kb judged
vLLM's own pick (FLASH_ATTN_MLA_SPARSE) as an MLA model and refused it structurally, so a line vLLM starts was left
conditional (vllm-project/vllm#30832's DeepSeek-V3.2 line on 8 x H20)."""

from __future__ import annotations

import json

from kbtool.solve.environment import backend_layout
from tests.util import run_kb


def test_the_backend_layout_of_a_sparse_mla_model() -> None:
    assert backend_layout({"attention": "mla", "sparse": True}) == "sparse-mla"
    assert backend_layout({"attention": "mla", "sparse": False}) == "mla"
    assert backend_layout({"attention": "gqa", "sparse": True}) == "gqa"
    assert backend_layout({}) is None


def _answer(*args: str) -> dict:  # type: ignore[type-arg]
    r = run_kb("query", "--json", *args, env={"HF_HUB_OFFLINE": "1"})
    assert r.code == 0, r.err
    return json.loads(r.out)  # type: ignore[no-any-return]


def test_vllms_sparse_pick_is_not_refused_for_its_layout() -> None:
    a = _answer("--gpu", "h200", "--gpus", "8", "--model", "deepseek-v3.2", "--ctx", "128k", "--engine", "vllm")
    assert a["engine"]["selected"] == "vllm-flash-attn-mla-sparse"
    by_id = {b["id"]: b for b in a["backends"]}
    sparse = [r["code"] for r in by_id["vllm-flash-attn-mla-sparse"]["reasons"]]
    dense = [r["code"] for r in by_id["vllm-flash-attn-mla"]["reasons"]]
    assert "ATTENTION" not in sparse and "ATTENTION" in dense  # vLLM's dense MLA backends refuse use_sparse
    assert a["verdict"] == "yes" and not any(c["code"] == "KERNELS_DOUBTED" for c in a["caveats"])


def test_a_dense_mla_model_keeps_its_dense_backends() -> None:
    a = _answer("--gpu", "h200", "--gpus", "8", "--model", "deepseek-v3", "--ctx", "128k", "--engine", "vllm")
    by_id = {b["id"]: b for b in a["backends"]}
    assert "ATTENTION" not in [r["code"] for r in by_id["vllm-flash-attn-mla"]["reasons"]]
    assert "ATTENTION" in [r["code"] for r in by_id["vllm-flash-attn-mla-sparse"]["reasons"]]
