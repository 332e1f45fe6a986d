"""The rotary-embedding cos/sin caches vLLM builds while it loads a model: GPU buffers that its "Model loading took
X GiB" (the weights in its memory profile) counts beside the parameters.

Read off vLLM's code (vllm-project/vllm vllm/model_executor/layers/rotary_embedding/, the same files in the 0.24.0
wheel, commit ee0da84ab, and the 0.26.0 wheel, commit ffd46bfab):

- one cache per distinct rope: `get_rope` keeps every embedding it builds in `_ROPE_DICT`, keyed by head size,
  rotary dim, max position, neox style, rope parameters and dtype (rotary_embedding/__init__.py:74-84), so the
  layers of a model share one (and _ROPE_DICT[key] = rotary_emb, __init__.py:383);
- the cache is `[positions, rotary_dim]` (cos and sin halves, base.py:94-103), cast to the rope's dtype and
  registered as a non-persistent buffer (base.py:58-63); the dtype is `torch.get_default_dtype()`, the model
  dtype while the model is built, unless the model passes one (__init__.py:41-42);
- positions: max_position_embeddings for the default, llama3 and dynamic ropes (base.py:97, dynamic_ntk_scaling_
  rope.py:67); max_position_embeddings x factor for linear scaling (linear_scaling_rope.py:90); the original
  max_position_embeddings x factor for YaRN and DeepSeek's YaRN (__init__.py:243-314, yarn_scaling_rope.py:77-79,
  deepseek_scaling_rope.py:111-114); original + max_position_embeddings for longrope (its short and long caches,
  phi3_long_rope_scaled_rope.py: long_short_cos_sin_cache);
- rotary dim: head_dim x partial_rotary_factor (__init__.py:66-72); an MLA layer's rope covers qk_rope_head_dim
  only (models/deepseek_v2.py:541-546 in 0.26.0, 501-506 in 0.24.0).

Where models differ (vllm/model_executor/models/; lines in 0.26.0, then 0.24.0):

- gpt-oss builds its rope in float32 (gpt_oss.py:91-94, 87-90: `dtype=torch.float32`);
- Gemma 3's sliding layers build their own default rope at rope_local_base_freq (gemma3.py:158-176, 162-180),
  beside the global layers' (linear-scaled in the 4B-27B checkpoints): two caches;
- Nemotron-H's attention layers have no rope (nemotron_h.py calls no get_rope in either wheel);
- ALiBi models build none.

The 0.33.0 wheel (commit 4ba787ec9), kb's default release, builds the same caches: base.py and
linear_scaling_rope.py unchanged, YaRN's cache length unchanged (only its mscale arguments move), gpt-oss still in
float32 (gpt_oss.py:111-114), Gemma 3 one rope per layer type (gemma3.py:157-163, config.rope_parameters[layer_type]:
still two), Nemotron-H none, the MLA rope at deepseek_v2.py:549-553.

DeepSeek's YaRN rope keeps its cache in float32 only where FlashInfer's rope kernel serves it (deepseek_scaling_rope
.py:61-67 with base.py:58-61); the recorded DeepSeek-V2-Lite boots load the same bytes eager and with graphs (where
that custom op is off), so the model dtype is taken.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kbtool.model import Model
    from kbtool.solve.image import ModelV

FLOAT32_ROPE = frozenset({"GptOssForCausalLM"})  # gpt_oss.py:94 in 0.26.0
LOCAL_ROPE = frozenset({"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"})  # gemma3.py:158-176 in 0.26.0
NO_ROPE = frozenset({"NemotronHForCausalLM"})  # nemotron_h.py builds no rotary embedding
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
ATTENTION = ("full", "sliding", "chunked", "mla")


def _scaling(model: Model | ModelV) -> tuple[str, float, int | None]:
    rs = getattr(model, "rope_scaling", None)
    if rs is None:
        return "default", 1.0, None
    d = rs if isinstance(rs, dict) else rs.model_dump()
    return str(d.get("type") or "default"), float(d.get("factor") or 1.0), d.get("original_max_position_embeddings")


def positions(model: Model | ModelV) -> int:
    """The rows of the model's (global) rope cache, as its rope class sizes it; 0 where the record has no
    max_position_embeddings."""
    mpe = model.max_context or 0
    kind, factor, original = _scaling(model)
    if kind == "linear":
        return int(mpe * factor)
    if kind in ("yarn", "deepseek_yarn", "deepseek_llama_scaling"):
        return int((original or mpe) * factor)
    if kind == "longrope":
        return int((original or 0) + mpe)
    return int(mpe)


def cache_bytes(model: Model | ModelV, weights: str | None = None) -> tuple[int, str]:
    """Bytes of the rope caches one GPU holds once vLLM has loaded `model` (each GPU builds the whole cache;
    tensor parallel does not split it), at the dtype the weights load as (`weights`: bf16/fp16/fp32 where given),
    and their words (\"\" for none)."""
    arch = getattr(model, "architecture", None)
    attn = [g for g in model.layers if g.type in ATTENTION]
    if not attn or arch in NO_ROPE or getattr(model, "alibi", False):
        return 0, ""
    mla = next((g for g in attn if g.type == "mla"), None)
    rotary = (mla.rope_dim or 64) if mla is not None else (getattr(model, "rotary_dim", None) or model.head_dim)
    base = weights if weights in DTYPE_BYTES else getattr(model, "unquantized_dtype", None) or "bf16"
    dtype = "fp32" if arch in FLOAT32_ROPE else base
    size = DTYPE_BYTES.get(dtype, 2)
    rows = positions(model)
    if not rows:
        return 0, ""
    caches = [(rows, _scaling(model)[0])]
    if arch in LOCAL_ROPE and any(g.type == "sliding" for g in attn) and any(g.type == "full" for g in attn):
        caches.append((int(model.max_context or 0), "local default"))
    total = sum(r for r, _k in caches) * rotary * size
    what = " + ".join(f"{r:,} x {rotary}" + (f" ({k})" if k != "default" else "") for r, k in caches)
    return total, f"rope cos/sin cache{'s' if len(caches) > 1 else ''} {total / 1e9:,.2f} GB ({what} x {size} B)"
