"""Model: a model's attention layout and weights, enough to size its KV cache and weights as vLLM does.

A record is written by hand or by `kb model import PATH/config.json` (kbtool/model/hfconfig.py), which maps a
Hugging Face config onto these fields and cites the config as the record's first source.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import Record as _Record
from .common import Strict, given, schema_rule

LayerType = Literal["full", "sliding", "chunked", "linear", "mla"]
WeightDtype = Literal["bf16", "fp16", "fp32", "fp8", "int8", "int4", "nvfp4", "mxfp4"]
ParamGroup = Literal["embedding", "lm_head", "attention", "mlp", "experts", "other"]


class StateTensor(Strict):
    """One fixed-size state tensor a linear-attention (Mamba, Gated DeltaNet) layer keeps per sequence."""

    name: str = Field(description="conv or recurrent (vLLM MambaSpec shapes, in its order)")
    shape: list[int] = Field(min_length=1, description="Shape at tensor parallel 1")
    tp_dim: int | None = Field(default=None, ge=0, description="Index of the dim tensor parallel divides")
    dtype: Literal["bf16", "fp16", "fp32"] = Field(description="Element dtype of the state")


_NEED = (("full", ("kv_heads", "head_dim")), ("sliding", ("kv_heads", "head_dim", "window")),
         ("chunked", ("kv_heads", "head_dim", "chunk")), ("mla", ("kv_lora_rank", "rope_dim")))


class LayerGroup(Strict):
    """`count` layers of one attention type."""

    model_config = schema_rule({"allOf": [
        *({"if": {"properties": {"type": {"const": t}}}, "then": given(*need)} for t, need in _NEED),
        {"if": {"properties": {"type": {"const": "linear"}}},
         "then": {"anyOf": [given("state"), given("state_bytes")]}},
        {"dependentRequired": {"index_head_dim": ["index_n_heads"], "index_n_heads": ["index_head_dim"]}}]})

    type: LayerType = Field(
        description="full, sliding (window), chunked (local chunks), linear (fixed state) or mla")
    count: int = Field(ge=1, le=10_000, description="Number of layers of this type")
    kv_heads: int | None = Field(default=None, ge=1, le=4096, description="KV heads (full/sliding/chunked)")
    head_dim: int | None = Field(default=None, ge=1, le=4096,
                                 description="K head dim (full/sliding/chunked); MLA: qk_nope + qk_rope")
    head_dim_v: int | None = Field(default=None, ge=1, le=4096, description="V head dim if it differs")
    window: int | None = Field(default=None, ge=1, description="Sliding window, tokens")
    chunk: int | None = Field(default=None, ge=1, description="Chunked local attention: chunk size, tokens")
    sinks: bool = Field(default=False, description="Learned attention sinks in these layers")
    kv_lora_rank: int | None = Field(default=None, ge=1, description="MLA latent rank")
    rope_dim: int | None = Field(default=None, ge=0, description="MLA decoupled RoPE dim (qk_rope_head_dim)")
    qk_nope_head_dim: int | None = Field(default=None, ge=0, description="MLA per-head no-RoPE q/k dim")
    index_head_dim: int | None = Field(default=None, ge=1,
                                       description="Sparse attention indexer: key head dim (DeepSeek-V3.2)")
    index_n_heads: int | None = Field(default=None, ge=1, description="Sparse attention indexer: query heads")
    index_topk: int | None = Field(default=None, ge=1, description="Sparse attention: tokens each query reads")
    state: list[StateTensor] | None = Field(default=None, description="Linear layers: state tensors per sequence")
    state_bytes: int | None = Field(
        default=None, ge=0, description="Linear layers: fixed state per sequence per layer, bytes (if no shapes)"
    )

    @model_validator(mode="after")
    def _fields_for_type(self) -> LayerGroup:
        need = {
            "full": ("kv_heads", "head_dim"),
            "sliding": ("kv_heads", "head_dim", "window"),
            "chunked": ("kv_heads", "head_dim", "chunk"),
            "linear": (),
            "mla": ("kv_lora_rank", "rope_dim"),
        }[self.type]
        missing = [f for f in need if getattr(self, f) is None]
        if self.type == "linear" and self.state is None and self.state_bytes is None:
            missing.append("state (or state_bytes)")
        if missing:
            raise ValueError(f"a '{self.type}' layer group needs {', '.join(missing)}")
        if (self.index_head_dim is None) != (self.index_n_heads is None):
            raise ValueError("a sparse indexer needs both index_head_dim and index_n_heads")
        return self


class RopeScaling(Strict):
    type: str = Field(description="rope_type: yarn, llama3, linear, dynamic, longrope, ...")
    factor: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="Scaling factor (finite)")
    original_max_position_embeddings: int | None = Field(default=None, ge=1,
                                                         description="Context the base model was trained at")


class Experts(Strict):
    routed: int = Field(ge=1, description="Routed experts per MoE layer")
    active: int = Field(ge=1, description="Routed experts each token uses")
    shared: int = Field(default=0, ge=0, description="Shared experts per MoE layer")
    moe_layers: int = Field(ge=1, description="Layers with an MoE block")
    bias: bool = Field(default=False, description="Each routed expert's projections carry biases (gate/up and "
                       "down: 2 x width + hidden per expert per MoE layer; gpt-oss), kept out of the quantization; "
                       "the parameter groups leave them out")


class ParameterGroups(Strict):
    """Parameters per group, derived from a config's shapes."""

    embedding: int | None = Field(default=None, ge=0, description="Token embeddings")
    lm_head: int | None = Field(default=None, ge=0, description="Output projection (0 when tied)")
    attention: int | None = Field(default=None, ge=0, description="Attention and linear-attention mixers")
    mlp: int | None = Field(default=None, ge=0, description="Dense MLP blocks")
    experts: int | None = Field(default=None, ge=0, description="MoE routed + shared experts and routers")
    other: int | None = Field(default=None, ge=0, description="Anything else")

    def items(self) -> list[tuple[str, int]]:
        return [(k, v) for k, v in self.model_dump(exclude_none=True).items() if v]


class EncoderProfile(Strict):
    """The tower's shapes that size vLLM's start-up encoder pass (kbtool/solve/engines/vllm/encoder_pass.py): the
    largest dummy item of its modality, run through the tower before the text forward. Filled from vision_config by
    the importer; the dynamic-resolution towers' pixel limits live in the checkpoint's preprocessor files, not in
    config.json, so they are added with their source (`pixels_source`), or left out (the pass is then not sized)."""

    family: Literal["siglip", "qwen-vit"] = Field(
        description="Which module code sizes the peak: 'siglip' (SiglipEncoder, fixed resolution), 'qwen-vit' "
        "(Qwen3_VisionTransformer, dynamic resolution)")
    hidden_size: int = Field(ge=1, description="The tower's width")
    intermediate_size: int = Field(ge=1, description="The tower's MLP width")
    patch_size: int = Field(ge=1, description="Pixels per patch side")
    temporal_patch_size: int = Field(default=1, ge=1, description="Frames per patch (an image is repeated to it)")
    merge_size: int = Field(default=1, ge=1, description="Patches merged per side into one output token")
    output_size: int = Field(ge=1, description="Width of one output embedding (the text hidden size x (1 + the "
                             "deepstack mergers))")
    num_heads: int | None = Field(default=None, ge=1, description="Dynamic-resolution towers: attention heads "
                                  "(their head width sizes the rotary tables the pass keeps)")
    deepstack: int = Field(default=0, ge=0, description="Dynamic-resolution towers: deepstack mergers (len of "
                           "vision_config.deepstack_visual_indexes), whose outputs the tower keeps to its end")
    image_size: int | None = Field(default=None, ge=1, description="Fixed-resolution towers: pixels per image side")
    tokens_per_image: int | None = Field(default=None, ge=1, description="Fixed-resolution towers: embeddings per "
                                         "image (Gemma 3's mm_tokens_per_image; pan-and-scan off, vLLM's default)")
    max_pixels: int | None = Field(default=None, ge=1, description="Dynamic-resolution towers: the image "
                                   "processor's size.longest_edge (pixels per image)")
    video_max_pixels: int | None = Field(default=None, ge=1, description="Dynamic-resolution towers: the video "
                                         "processor's size.longest_edge (pixels per clip)")
    pixels_source: str | None = Field(default=None, description="Where max_pixels / video_max_pixels come from "
                                      "(the processor files' address)")


class Encoder(Strict):
    """A multimodal model's encoder (tower and projector), loaded beside the text model unless the serve line turns
    its modalities off (kbtool/model/encoder.py)."""

    modality: Literal["vision", "audio"] = Field(description="What the encoder reads")
    parameters: int = Field(ge=1, description="Parameters of the tower and its projector, as vLLM builds them")
    tower: str = Field(description="vLLM's classes for it (SiglipVisionModel + Gemma3MultiModalProjector)")
    modalities: list[str] = Field(min_length=1, description="The --limit-mm-per-prompt modalities that load it "
                                  "(vLLM skips it when every one is 0, or under --language-model-only)")
    profile: EncoderProfile | None = Field(
        default=None, description="The shapes that size vLLM's start-up encoder pass; absent: a tower kb does not "
        "size that pass for")


class Model(_Record):
    kind: Literal["model"] = Field(description="Record kind")
    family: str = Field(description="Model family")
    architecture: str | None = Field(
        default=None, description="The config's architectures[0] (Qwen3ForCausalLM): which vLLM model runner serves it")
    parameters: int = Field(ge=1, description="Total parameter count (text model, without MTP/vision towers)")
    encoders: list[Encoder] | None = Field(
        default=None, description="Multimodal encoders (vision/audio towers), counted in the weights as the engine "
                                  "loads them, at the unquantized dtype")
    parameters_basis: Literal["recorded", "derived"] = Field(
        default="recorded", description="recorded from a source, or derived from the config's shapes")
    parameter_groups: ParameterGroups | None = Field(
        default=None, description="Parameters per group (derived from the config's shapes)")
    weight_dtype: WeightDtype = Field(description="Dtype of the released weights (the quantized ones, if any)")
    unquantized_dtype: Literal["bf16", "fp16", "fp32"] = Field(
        default="bf16", description="torch_dtype: the dtype of the tensors that are not quantized")
    quantized: list[ParamGroup] | None = Field(
        default=None, description="Groups stored at weight_dtype when it is a quantized format "
                                  "(default attention, mlp, experts)")
    quant_group_size: int | None = Field(default=None, ge=1,
                                         description="int4: values per scale (AWQ/GPTQ group size)")
    group_dtypes: dict[ParamGroup, WeightDtype] | None = Field(
        default=None, description="A mixed-precision checkpoint's groups stored at a quantized format other than "
                                  "weight_dtype (ModelOpt MIXED_PRECISION's per-layer quant_algo: attention fp8 "
                                  "beside nvfp4 experts)")
    kept_unquantized: dict[ParamGroup, int] | None = Field(
        default=None, description="Of a quantized group, the parameters the checkpoint leaves at unquantized_dtype "
                                  "(a MoE router, a linear-attention layer's a/b projections and conv)")
    weight_bytes: int | None = Field(
        default=None, ge=1, description="Exact size of the released weights where it differs from params x dtype"
    )
    weight_bytes_f32: int | None = Field(
        default=None, ge=1, description="Of weight_bytes, the bytes of float32 tensors (an engine's --dtype auto "
        "loads a float32 checkpoint's at 2 bytes per value)")
    num_heads: int = Field(ge=1, description="Query heads")
    head_dim: int = Field(ge=1, description="Query/key head dim the attention kernel sees")
    hidden_size: int | None = Field(default=None, ge=1, description="Model width (activation reserve)")
    intermediate_size: int | None = Field(default=None, ge=1,
                                          description="MLP width a token passes through (MoE: active experts x width)")
    vocab_size: int | None = Field(default=None, ge=1, description="Vocabulary (logits in the reserve)")
    max_context: int | None = Field(default=None, ge=1, description="max_position_embeddings, tokens")
    rope_scaling: RopeScaling | None = Field(default=None, description="RoPE scaling of the config")
    rotary_dim: int | None = Field(default=None, ge=1, description="Dims of each head RoPE rotates where fewer than "
                                   "head_dim (head_dim x the config's partial_rotary_factor)")
    softcap: float | None = Field(default=None, gt=0, description="Attention logit softcap (None = none)")
    alibi: bool = Field(default=False, description="ALiBi position biases")
    experts: Experts | None = Field(default=None, description="MoE expert counts")
    mtp_layers: int | None = Field(
        default=None, ge=1, description="Multi-token-prediction (MTP / NextN) decoder layers the checkpoint carries "
        "beside the model (the config's mtp_num_hidden_layers, num_nextn_predict_layers or num_mtp_modules): "
        "not in `parameters`; an engine loads them as a speculative draft")
    mtp_parameters: int | None = Field(
        default=None, ge=1, description="Parameters of those MTP layers, derived from the config's shapes: per "
        "layer one decoder layer of the model's attention type with its MLP or experts, and the projection of the "
        "concatenated embedding and hidden state (2 x hidden -> hidden); embeddings and lm_head are the model's")
    layers: list[LayerGroup] = Field(min_length=1, description="Layer groups by attention type")

    @model_validator(mode="after")
    def _heads_consistent(self) -> Model:
        """KV heads of a full or sliding group divide the query heads (transformers and the engines group query
        heads over KV heads: num_attention_heads % num_key_value_heads == 0)."""
        for i, g in enumerate(self.layers):
            if g.type in ("full", "sliding", "chunked") and g.kv_heads is not None and \
                    self.num_heads % g.kv_heads != 0:
                raise ValueError(f"layers[{i}].kv_heads {g.kv_heads} does not divide num_heads {self.num_heads} "
                                 "(query heads are grouped over KV heads)")
        return self

    @model_validator(mode="after")
    def _mixed_precision_consistent(self) -> Model:
        """group_dtypes name quantized formats of groups the record counts, none of them also in `quantized`;
        kept_unquantized is part of a group that is quantized, and no larger than it."""
        counted = dict(self.parameter_groups.items()) if self.parameter_groups is not None else {}
        mixed = self.group_dtypes or {}
        for g, fmt in mixed.items():
            if fmt in ("bf16", "fp16", "fp32") or fmt == self.weight_dtype:
                raise ValueError(f"group_dtypes.{g} {fmt} is not a second quantized format (weight_dtype is "
                                 f"{self.weight_dtype}; unquantized groups are left out)")
            if g in (self.quantized or []) or not counted.get(g):
                raise ValueError(f"group_dtypes.{g}: the group is in `quantized` too, or has no parameters")
        for g, n in (self.kept_unquantized or {}).items():
            if g not in mixed and g not in (self.quantized or []):
                raise ValueError(f"kept_unquantized.{g}: the group is not quantized (not in `quantized` or "
                                 "group_dtypes)")
            if not 0 < n <= counted.get(g, 0):
                raise ValueError(f"kept_unquantized.{g} {n:,} is not part of the group's "
                                 f"{counted.get(g, 0):,} parameters")
        return self
