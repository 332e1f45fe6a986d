"""ModelOpt MIXED_PRECISION checkpoints (a per-layer quant_algo map): each parameter group at the format its
layers declare, as vLLM 0.24.0 loads them (vllm/model_executor/layers/quantization/modelopt.py:2464-2510,
ModelOptMixedPrecisionConfig.get_quant_method), on nvidia/Qwen3.6-35B-A3B-NVFP4's published config.json."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from kbtool.model.hfconfig import ConfigError, to_record
from kbtool.model.model_card import Model
from kbtool.solve.weights import WEIGHT_BYTES, weight_bytes
from kbtool.store.hfconfig_file import read_config
from tests.util import DATA, RECORDS

HERE = DATA / "hf-configs" / "qwen3.6-35b-a3b-nvfp4"


def config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / "config.json").read_text())
    return data


def record(data: dict[str, Any], quant: dict[str, Any] | None = None) -> dict[str, Any]:
    return to_record(data, "t", where="config.json", quant=quant)


def test_each_group_takes_the_format_its_layers_declare() -> None:
    r = record(config())
    Model.model_validate(r)
    # experts (routed and shared) and lm_head W4A16_NVFP4; self_attn and linear_attn projections FP8
    assert (r["weight_dtype"], r["quantized"], r["group_dtypes"]) == ("nvfp4", ["lm_head", "experts"],
                                                                      {"attention": "fp8"})
    t = config()["text_config"]
    linear = t["layer_types"].count("linear_attention") if "layer_types" in t else \
        t["num_hidden_layers"] - t["num_hidden_layers"] // t["full_attention_interval"]
    conv = t["linear_key_head_dim"] * t["linear_num_key_heads"] * 2 + t["linear_value_head_dim"] * \
        t["linear_num_value_heads"]
    # what the map leaves out stays bf16: the router of each MoE layer, and each Gated DeltaNet layer's
    # in_proj_a/in_proj_b (vLLM's in_proj_ba) and conv1d
    assert r["kept_unquantized"] == {
        "attention": linear * (conv * t["linear_conv_kernel_dim"] + t["hidden_size"] * 2 * t["linear_num_value_heads"]),
        "experts": t["num_hidden_layers"] * t["hidden_size"] * t["num_experts"]}
    assert "MIXED_PRECISION" in r["notes"]


def test_the_legacy_hf_quant_config_gives_the_same_record() -> None:
    data = config()
    quant = json.loads((HERE / "hf_quant_config.json").read_text())
    del data["quantization_config"]
    assert {k: v for k, v in record(data, quant).items() if k != "notes"} == \
        {k: v for k, v in record(config()).items() if k != "notes"}


def test_the_weights_add_up_group_by_group() -> None:
    m = Model.model_validate(record(config()))
    pg = dict(m.parameter_groups.items()) if m.parameter_groups else {}
    kept = m.kept_unquantized or {}
    want = ((pg["experts"] - kept["experts"] + pg["lm_head"]) * WEIGHT_BYTES["nvfp4"]
            + (pg["attention"] - kept["attention"]) * WEIGHT_BYTES["fp8"]
            + (pg["embedding"] + kept["experts"] + kept["attention"]) * WEIGHT_BYTES["bf16"]
            + m.encoders[0].parameters * WEIGHT_BYTES["bf16"])
    total, how = weight_bytes(m)
    assert total == int(want) or abs(total - want) <= 2
    assert "(fp8: attention)" in how and "nvfp4: " in how
    # --weights nvfp4 still means nvfp4 over attention, mlp and experts (the deployment the user names)
    assert weight_bytes(m, "nvfp4")[0] != total


def _mutated(change: Any) -> dict[str, Any]:
    data = copy.deepcopy(config())
    change(data["quantization_config"]["quantized_layers"])
    return data


@pytest.mark.parametrize("change, message", [
    (lambda q: q.pop("model.language_model.layers.3.self_attn.o_proj"), "only in part"),
    (lambda q: q.pop("model.language_model.layers.0.linear_attn.out_proj"), "only in part"),
    (lambda q: q.pop("model.language_model.layers.7.mlp.experts"), "only in part"),
    (lambda q: q["model.language_model.layers.0.mlp.experts"].update(quant_algo="FP8"), "at fp8 and nvfp4"),
    (lambda q: q["lm_head"].update(quant_algo="W4A8_AWQ"), "W4A8_AWQ"),
])
def test_a_map_kb_cannot_size_whole_is_refused(change: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        record(_mutated(change))


def test_the_record_is_the_imported_config() -> None:
    got = read_config(str(HERE / "config.json"))
    on_disk = yaml.safe_load((RECORDS / "models" / "qwen3.6-35b-a3b-nvfp4.yaml").read_text())
    for k in ("parameters", "parameter_groups", "weight_dtype", "quantized", "group_dtypes", "kept_unquantized"):
        assert on_disk[k] == got[k], k


@pytest.mark.parametrize("change, message", [
    ({"group_dtypes": {"attention": "nvfp4"}}, "not a second quantized format"),
    ({"group_dtypes": {"experts": "fp8"}}, "in `quantized` too"),
    ({"kept_unquantized": {"embedding": 5}}, "not quantized"),
    ({"kept_unquantized": {"experts": 10**12}}, "not part of the group"),
])
def test_the_record_checks_its_mixed_fields(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Model.model_validate({**record(config()), **change})


def test_an_mla_layer_in_a_mixed_map_is_refused_not_guessed() -> None:
    data = json.loads((DATA / "hf-configs" / "deepseek-v3" / "config.json").read_text())
    data["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.self_attn.q_a_proj": {"quant_algo": "FP8"}}}
    with pytest.raises(ConfigError, match="MLA full layer"):
        record(data)
