"""Issue 19's done-when check: `kb query --gpu h100 --model PATH/config.json --ctx 32k --kv fp8` answers for
every config under tests/data/hf-configs, with KV bytes per token equal to vLLM's formula computed here,
independently of the importer, from the config's own numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.util import DATA, run_kb

CONFIGS = sorted((DATA / "hf-configs").glob("*/config.json"))


def _text(cfg: dict[str, Any], defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The text model's fields, with the config-class defaults SOURCE.yaml lists for the ones left out."""
    t = cfg.get("text_config")
    merged = {**cfg, **t} if isinstance(t, dict) else dict(cfg)
    for k, v in (defaults or {}).items():
        if merged.get(k) is None:
            merged[k] = v
    return merged


def _defaults(path: Path) -> dict[str, Any]:
    side = yaml.safe_load((path.parent / "SOURCE.yaml").read_text())
    return ((side or {}).get("defaults") or {}).get("text_config") or {}


def expected_fp8_bytes_per_token(cfg: dict[str, Any], defaults: dict[str, Any] | None = None) -> int:
    """vLLM's KV page bytes per token at fp8, summed over the layers that keep a KV cache (tp 1)."""
    c = _text(cfg, defaults)
    n = c.get("num_hidden_layers")
    if c.get("kv_lora_rank"):  # MLAAttentionSpec: one latent; fp8_ds_mla 656 B with a sparse indexer
        layers = c["num_hidden_layers"]
        if c.get("index_head_dim"):
            return layers * (656 + c["index_head_dim"] + c["index_head_dim"] // 128 * 4)
        return layers * (c["kv_lora_rank"] + c["qk_rope_head_dim"])
    heads = c["num_attention_heads"]
    if c.get("model_type") == "chatglm":  # vLLM chatglm.py: multi_query_group_num KV heads of kv_channels
        kvh = c["multi_query_group_num"] if c.get("multi_query_attention") else heads
        return c["num_layers"] * kvh * 2 * c["kv_channels"]
    head = c.get("head_dim") or c.get("attention_head_dim") or c["hidden_size"] // heads
    kvh = c.get("num_key_value_heads") or heads
    per_layer: list[int] = []
    if "hybrid_override_pattern" in c:  # Nemotron-H: '*' layers are attention
        per_layer = [kvh * 2 * head] * c["hybrid_override_pattern"].count("*")
    elif "block_configs" in c:  # DeciLM: per-block GQA group, no-op blocks have no cache
        for b in c["block_configs"]:
            a = b["attention"]
            if not (a.get("no_op") or a.get("replace_with_linear")):
                per_layer.append(heads // a["n_heads_in_group"] * 2 * head)
    elif "hybrid_layer_pattern" in c:  # MiMo-V2: 1 = sliding-window layer with its own heads and dims
        for x in c["hybrid_layer_pattern"][:n]:
            if x:
                per_layer.append(c["swa_num_key_value_heads"] * (c["swa_head_dim"] + c["swa_v_head_dim"]))
            else:
                per_layer.append(kvh * (head + c.get("v_head_dim", head)))
    else:
        types = c.get("layer_types") or []
        if not types and c.get("full_attention_interval"):
            k = c["full_attention_interval"]
            types = ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n)]
        types = types or ["full_attention"] * n
        for t in types[:n]:
            if t == "linear_attention":
                continue
            if t == "full_attention" and c.get("global_head_dim"):  # Gemma 4 global layers
                per_layer.append(c["num_global_key_value_heads"] * 2 * c["global_head_dim"])
            else:
                per_layer.append(kvh * 2 * head)
    return sum(per_layer)


def test_there_are_at_least_15_configs_each_with_its_source() -> None:
    assert len(CONFIGS) >= 15
    for p in CONFIGS:
        src = (p.parent / "SOURCE.yaml").read_text()
        assert "repo:" in src and "path:" in src and "commit:" in src, p


@pytest.mark.parametrize("path", CONFIGS, ids=[p.parent.name for p in CONFIGS])
def test_query_answers_with_vllm_kv_bytes(path: Path) -> None:
    r = run_kb("query", "--gpu", "h100", "--model", str(path), "--ctx", "32k", "--kv", "fp8", "--json")
    assert r.code == 0, r.err
    mem = json.loads(r.out)["memory"]
    assert mem["kv_bytes_per_token"] == expected_fp8_bytes_per_token(json.loads(path.read_text()), _defaults(path))
    assert mem["capacity_bytes"] > 0 and mem["max_sequences"] is not None
    assert mem["ctx_limit"] in ("memory", "model")
