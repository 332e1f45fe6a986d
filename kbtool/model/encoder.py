"""The parameter count of a multimodal model's encoder (vision tower and projector), from its config.json, module by
module as vLLM builds it (issues 44 and 47).

vLLM builds the tower inside `_mark_tower_model` and loads it unless every modality it serves is limited to 0
(`--limit-mm-per-prompt`, or `--language-model-only`, which makes every limit 0):
vllm/model_executor/models/interfaces.py:347-400 and vllm/config/multimodal.py:700 (get_limit_per_prompt) in
0.33.0; interfaces.py:249-290 and multimodal.py:264 in 0.19.1; the same in 0.24.0 and 0.26.0. Each family below follows
the module files of vLLM 0.33.0 (vllm/model_executor/models/...); weights, biases and norms are all counted, since the
tower is small and its biases are not negligible against it.

A family kb has not modelled (Gemma 4's tower, built by transformers' AutoModel) gives None: the weights are then
the text model's, and the answer says the tower is left out.
"""

from __future__ import annotations

from typing import Any

TOWER_MODALITIES: dict[str, tuple[str, ...]] = {
    # the modalities each model class passes to _mark_tower_model (0.33.0 line; the same call in 0.19.1-0.34.0)
    "Gemma3ForConditionalGeneration": ("image",),  # gemma3_mm.py:552
    "Qwen2_5_VLForConditionalGeneration": ("image", "video"),  # qwen2_5_vl.py:1434
    "Qwen3VLForConditionalGeneration": ("image", "video"),  # qwen3_vl.py:2010
    "Qwen3VLMoeForConditionalGeneration": ("image", "video"),  # qwen3_vl_moe.py:255
    "Qwen3_5ForConditionalGeneration": ("image", "video"),  # qwen3_5.py:513
    "Qwen3_5MoeForConditionalGeneration": ("image", "video"),  # qwen3_5.py:736
    "Llama4ForConditionalGeneration": ("image",),  # mllama4.py:765
    "Mistral3ForConditionalGeneration": ("image",),  # mistral3.py:478
    "KimiK25ForConditionalGeneration": ("vision_chunk",),  # kimi_k25.py:349
    "Gemma4ForConditionalGeneration": ("image", "video"),  # gemma4_mm.py:1101
}


def _ln(h: int) -> int:
    return 2 * h  # LayerNorm: weight and bias


def _lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def siglip_gemma3(v: dict[str, Any], text_hidden: int) -> int:
    """SiglipVisionModel (siglip.py: patch Conv2d with bias, learned positions over (image/patch)^2, per layer two
    LayerNorms, q/k/v/out with bias, fc1/fc2 with bias; post_layernorm; no head as vision_use_head is false) and
    Gemma3MultiModalProjector (gemma3_mm.py:455-466: a vision x text projection matrix and an RMSNorm)."""
    h, i, n, p = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"], v["patch_size"]
    image = v.get("image_size", 224)
    emb = _lin(3 * p * p, h) + (image // p) ** 2 * h
    layer = 2 * _ln(h) + 4 * _lin(h, h) + _lin(h, i) + _lin(i, h)
    return int(emb + n * layer + _ln(h) + h * text_hidden + h)


def qwen2_5_vl(v: dict[str, Any], text_hidden: int) -> int:  # noqa: ARG001 (out_hidden_size is the config's)
    """Qwen2_5_VisionTransformer (qwen2_5_vl.py: Conv3d patch embed without bias over temporal_patch_size x p x p,
    per block two RMSNorms, qkv/proj with bias, gated MLP with bias; the merger: RMSNorm then two linears with
    bias from hidden x merge^2)."""
    h, i, n, p = v["hidden_size"], v["intermediate_size"], v["depth"], v["patch_size"]
    t, m = v.get("temporal_patch_size", 2), v.get("spatial_merge_size", 2) ** 2
    emb = 3 * t * p * p * h
    block = 2 * h + _lin(h, 3 * h) + _lin(h, h) + _lin(h, 2 * i) + _lin(i, h)
    merger = h + _lin(h * m, h * m) + _lin(h * m, v["out_hidden_size"])
    return int(emb + n * block + merger)


def qwen3_vl(v: dict[str, Any], text_hidden: int) -> int:  # noqa: ARG001
    """Qwen3_VisionTransformer (qwen3_vl.py:392-660; Qwen3.5 builds the same class, qwen3_5.py:513): Conv3d patch
    embed with bias, learned positions (num_position_embeddings), per block two LayerNorms, qkv/proj with bias, a
    two-linear MLP with bias; the merger (LayerNorm over hidden, two linears) and one deepstack merger per
    deepstack_visual_indexes entry (LayerNorm over hidden x merge^2)."""
    h, i, n, p = v["hidden_size"], v["intermediate_size"], v["depth"], v["patch_size"]
    t, m = v.get("temporal_patch_size", 2), v.get("spatial_merge_size", 2) ** 2
    emb = _lin(3 * t * p * p, h) + v.get("num_position_embeddings", 2304) * h
    block = 2 * _ln(h) + _lin(h, 3 * h) + _lin(h, h) + _lin(h, i) + _lin(i, h)
    mlp = _lin(h * m, h * m) + _lin(h * m, v["out_hidden_size"])
    deep = len(v.get("deepstack_visual_indexes") or [])
    return int(emb + n * block + _ln(h) + mlp + deep * (_ln(h * m) + mlp))


def llama4(v: dict[str, Any], text_hidden: int) -> int:
    """Llama4VisionModel and Llama4MultiModalProjector (mllama4.py; vLLM passes quant_config=None to both): class
    embedding, positions over (image/patch)^2 + 1, a linear patch embed without bias, pre and post LayerNorms, per
    layer q/k/v/o and fc1/fc2 with bias and two LayerNorms; the pixel-shuffle adapter's two linears
    (mllama4.py:224-231, multi_modal_projector_bias), and the projector to the text width without bias."""
    h, i, n, p = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"], v["patch_size"]
    image = v["image_size"]
    emb = h + ((image // p) ** 2 + 1) * h + 3 * p * p * h + 2 * _ln(h)
    layer = 4 * _lin(h, h) + _lin(h, i) + _lin(i, h) + 2 * _ln(h)
    pin, pout, bias = v["projector_input_dim"], v["projector_output_dim"], bool(v.get("multi_modal_projector_bias"))
    adapter = _lin(i, pin, bias) + _lin(pin, pout, bias)  # Llama4VisionPixelShuffleMLP: fc1 from intermediate_size
    return int(emb + n * layer + adapter + v["vision_output_dim"] * text_hidden)


def pixtral_mistral3(v: dict[str, Any], text_hidden: int, top: dict[str, Any]) -> int:
    """PixtralHFVisionModel (pixtral.py: Conv2d patch embed without bias, ln_pre RMSNorm, per layer two RMSNorms,
    q/k/v/o and a gated MLP without bias; no post norm, require_post_norm=False) and Mistral3MultiModalProjector
    (mistral3.py: an RMSNorm, the patch merger's linear over hidden x merge^2 without bias, two linears to the text
    width with multimodal_projector_bias)."""
    h, i, n, p = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"], v["patch_size"]
    m = top.get("spatial_merge_size", 2) ** 2
    bias = bool(top.get("multimodal_projector_bias", False))
    tower = 3 * p * p * h + h + n * (2 * h + 4 * h * h + 3 * h * i)
    projector = h + h * m * h + _lin(h, text_hidden, bias) + _lin(text_hidden, text_hidden, bias)
    return int(tower + projector)


def moonvit_kimi(v: dict[str, Any], text_hidden: int) -> int:
    """MoonViT3dPretrainedModel (kimi_k25_vit.py:709-760: Conv2d patch embed with bias, a learned height x width
    position table, per block two LayerNorms, wqkv/wo and a two-linear MLP with bias, a final LayerNorm) and
    KimiK25MultiModalProjector (kimi_k25_vit.py:891-945, patchmerger: a LayerNorm, two linears with bias from
    hidden x merge^2)."""
    h = v.get("vt_hidden_size") or v["hidden_size"]
    i = v.get("vt_intermediate_size") or v["intermediate_size"]
    n = v.get("vt_num_hidden_layers") or v["num_hidden_layers"]
    p = v["patch_size"]
    mh, mw = v.get("merge_kernel_size") or (2, 2)
    emb = _lin(3 * p * p, h) + v.get("init_pos_emb_height", 64) * v.get("init_pos_emb_width", 64) * h
    block = 2 * _ln(h) + _lin(h, 3 * h) + _lin(h, h) + _lin(h, i) + _lin(i, h)
    hm = h * mh * mw
    projector = _ln(h) + _lin(hm, hm) + _lin(hm, text_hidden)
    return int(emb + n * block + _ln(h) + projector)


TOWERS = {
    "Gemma3ForConditionalGeneration": ("SiglipVisionModel + Gemma3MultiModalProjector", siglip_gemma3),
    "Qwen2_5_VLForConditionalGeneration": ("Qwen2_5_VisionTransformer", qwen2_5_vl),
    "Qwen3VLForConditionalGeneration": ("Qwen3_VisionTransformer", qwen3_vl),
    "Qwen3VLMoeForConditionalGeneration": ("Qwen3_VisionTransformer", qwen3_vl),
    "Qwen3_5ForConditionalGeneration": ("Qwen3_VisionTransformer", qwen3_vl),
    "Qwen3_5MoeForConditionalGeneration": ("Qwen3_VisionTransformer", qwen3_vl),
    "Llama4ForConditionalGeneration": ("Llama4VisionModel + Llama4MultiModalProjector", llama4),
    "Mistral3ForConditionalGeneration": ("PixtralHFVisionModel + Mistral3MultiModalProjector", None),
    "KimiK25ForConditionalGeneration": ("MoonViT3dPretrainedModel + KimiK25MultiModalProjector", moonvit_kimi),
}


QWEN_VIT = frozenset({"Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
                      "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"})


def profile_shape(arch: str, v: dict[str, Any], text_hidden: int, top: dict[str, Any]) -> dict[str, Any] | None:
    """The shapes that size vLLM's start-up encoder pass (kbtool/solve/engines/vllm/encoder_pass.py), for the towers
    whose module code kb read for it: SigLIP (Gemma 3; its image tokens are config.mm_tokens_per_image, 256 by
    default, vLLM gemma3_mm.py get_num_image_tokens with pan-and-scan off) and Qwen3_VisionTransformer (Qwen3-VL,
    Qwen3.5; the pixel limits are the processor files', not config.json's, so they stay out here). None for others
    (Qwen2.5-VL's windowed tower, Llama 4, Pixtral, MoonViT: not read for the pass)."""
    if arch == "Gemma3ForConditionalGeneration":
        return {"family": "siglip", "hidden_size": int(v["hidden_size"]),
                "intermediate_size": int(v["intermediate_size"]), "patch_size": int(v["patch_size"]),
                "output_size": int(text_hidden), "image_size": int(v.get("image_size", 224)),
                "tokens_per_image": int(top.get("mm_tokens_per_image") or 256)}
    if arch in QWEN_VIT:
        deep = len(v.get("deepstack_visual_indexes") or [])
        return {"family": "qwen-vit", "hidden_size": int(v["hidden_size"]),
                "intermediate_size": int(v["intermediate_size"]), "patch_size": int(v["patch_size"]),
                "temporal_patch_size": int(v.get("temporal_patch_size", 2)),
                "merge_size": int(v.get("spatial_merge_size", 2)),
                "output_size": int(v["out_hidden_size"]) * (1 + deep),
                "num_heads": int(v["num_heads"]), "deepstack": deep}
    return None


def vision_encoder(data: dict[str, Any], text_hidden: int) -> dict[str, Any] | None:
    """{"modality": "vision", "parameters": N, "tower": vLLM's classes, "modalities": [...]} for a config with a
    vision_config of a family kb models; None for any other config (text-only, or a tower kb does not model)."""
    v = data.get("vision_config")
    arch = data.get("architectures")
    arch = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else None
    if not isinstance(v, dict) or arch not in TOWERS:
        return None
    tower, fn = TOWERS[arch]
    try:
        n = pixtral_mistral3(v, text_hidden, data) if fn is None else fn(v, text_hidden)
    except (KeyError, TypeError):
        return None  # a vision_config without the fields the family needs: left out, not guessed
    out: dict[str, Any] = {"modality": "vision", "parameters": int(n), "tower": tower,
                           "modalities": list(TOWER_MODALITIES[arch])}
    try:
        shape = profile_shape(arch, v, text_hidden, data)
    except (KeyError, TypeError, ValueError):
        shape = None
    if shape:
        out["profile"] = shape
    return out
