"""vLLM's start-up encoder pass for a multimodal model (issue 44): before the text forward of its profile run, vLLM
encodes a dummy batch of the largest items its encoder budget allows and keeps the outputs until the profile run
ends, so the torch peak it takes off the KV budget is the larger of that pass and the text steps plus the outputs.

What the code does (the same arithmetic in the vLLM 0.24.0, 0.26.0, 0.33.0 and 0.34.0 wheels; which runners run
the pass is the engine-release record's `accounting.encoder_pass`):

- The modality: of those whose --limit-mm-per-prompt is above 0 (unset: 999, vllm/config/multimodal.py:318-322 in
  0.24.0), the one with the most tokens per item (multimodal/encoder_budget.py:182-186 in 0.24.0,
  get_modality_with_max_tokens).
- The budget: max(max_num_batched_tokens, its tokens per item), the encoder's compute budget and cache size both
  default to max_num_batched_tokens (config/scheduler.py:248-249 in 0.24.0, :306-307 in 0.33.0, :350-351 in 0.34.0;
  v1/core/encoder_cache_manager.py:269-318 in 0.24.0, :329 in 0.34.0).
- The items: max(1, min(budget // tokens, max_num_seqs x max(1, min(limit, max_model_len // tokens))))
  (encoder_budget.py:140-180 in 0.24.0, :142-182 in 0.34.0; with chunked prefill on, vLLM's default).
- The inputs: one dummy item of the most features, repeated `items` times into one batch on the GPU, its pixels in
  the model dtype (multimodal/processing/context.py:226-235 in 0.24.0, :357-367 in 0.34.0 cast floating tensors).
- Tokens per item: Gemma 3, config.mm_tokens_per_image with pan-and-scan off (models/gemma3_mm.py:194-210 in 0.24.0,
  (0 crops + 1) x image_seq_length); Qwen3-VL / Qwen3.5, the processor's size.longest_edge over (patch x merge)^2,
  as the closest factor pair with an aspect ratio of at most 200 (models/qwen2_vl.py:965-1016 in 0.24.0,
  get_image_size_with_most_features; a video of 2 frames at the video processor's longest_edge / temporal_patch_size,
  qwen3_vl.py:963-988).

The tower's peak, counted tensor by tensor from the module code (model dtype, 2 bytes), per patch of H = hidden and
I = MLP width (column-parallel widths divided by tensor parallel):

- qwen-vit (Qwen3_VisionTransformer, qwen3_vl.py:414-466 and qwen2_5_vl.py Qwen2_5_VisionAttention.forward in
  0.24.0; re-read in 0.26.0, qwen3_vl.py:413-464 and :800-846, qwen2_5_vl.py:398-456): the block's input (held by
  the tower's layer loop), the position embeddings (held in encoder_metadata for the whole pass), the block's own
  tensors. Attention: norm1's output, qkv [3H], the contiguous q/k [2H] and their rotated copy [2H], the attention
  output re-laid contiguous [H], the projection [H]: 4H + 8H/tp. MLP: the post-attention sum and norm2's output
  beside the input and positions, fc1 [I] and the activation [I]: 4H + 2I/tp. Beside the block, for the whole
  pass (0.26.0):
  - the rotary cos and sin tables, [patches, head_dim / 2] each in the model dtype, kept in encoder_metadata
    (qwen3_vl.py:667-683, :738-740; the triton rotary kernel asserts they match q/k's dtype and writes a new
    tensor, vllm_flash_attn/ops/triton/rotary.py:173-178 and :188; ApplyRotaryEmb's fp32 compute is off by default,
    layers/rotary_embedding/common.py:132): head_dim values a patch;
  - the deepstack features: after the blocks of deepstack_visual_indexes the tower appends a merger's output,
    [patches / merge^2, out_hidden] each, to a list it keeps until the final concatenation (qwen3_vl.py:821-840),
    so the later blocks peak with all of them alive: deepstack x out_hidden / merge^2 values a patch (Qwen3-VL-4B:
    3 x 2,560 / 4 = 1,920, 0.23 GiB at 65,536 patches; Qwen3.5 / 3.6 have none). kb counts every merger as alive,
    as it is for each recorded Qwen3-VL (the last index is before the last block).
  The FLASH_ATTN wrapper passes q/k/v on as views (v1/attention/ops/vit_attn_wrappers.py:54, one item: b = 1) and
  the pixels reach the tower already in the model dtype (qwen3_vl.py:2181 `.type` is then no copy).
- siglip (SiglipEncoder, siglip.py:478-575 in 0.24.0): the first embeddings (kept in hidden_states_pool), the
  layer's input, the in-place residual, norm2's output, fc1 [I] and the activation [I]: 4H + 2I/tp; attention: the
  three held [P, H] tensors, qkv [3H], the output and projection: 4H + 4H/tp.
- plus the dummy pixels, 3 x temporal_patch_size x patch^2 values per patch.
- plus torch's cuBLAS workspace (`workspace`, the caller's pool.CUBLAS_WORKSPACE_BYTES): the pass makes the
  profile run's first cuBLAS matmul (the patch embedding is a linear, layers/conv.py:219-231 in 0.26.0), which
  takes it through the caching allocator, so the pass's peak holds it as the text step's does.

With these Qwen3-VL-4B's pass (65,536 patches) is 1.961 GiB against the 1.962 GiB vLLM 0.26.0 logged where it alone
sets the profile peak (evidence 2026-12-07-nvidia-h100-sxm-vllm-boot-14, qwen3-vl-4b-...-v1runner-mns1); without the
tables, the deepstack features and the workspace it was 1.69 GiB.

Not counted: the attention kernel's own workspace (flash-attention's softmax statistics, fp32 [heads, patches]),
the projector after the last block (smaller than a block at these widths), and --mm-processor-kwargs (which can
change the item size: kb reads the processor's defaults only).
"""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ACT_BYTES = 2  # the tower runs in the model dtype (bf16/fp16)
DEFAULT_LIMIT = 999  # vllm/config/multimodal.py:318-322 (0.24.0): an unset modality's limit per prompt
MAX_RATIO = 200  # qwen2_vl.py get_image_size_with_most_features: the widest aspect ratio it factorises to


class Pass:
    """The encoder pass vLLM's profile run makes: `peak` (bytes alive at the tower's peak, pixels included),
    `outputs` (bytes of the encoder outputs kept through the text steps), and `words`."""

    __slots__ = ("items", "modality", "outputs", "patches", "peak", "tokens", "words")

    def __init__(self, modality: str, items: int, tokens: int, patches: int, peak: int, outputs: int,
                 words: str) -> None:
        self.modality, self.items, self.tokens, self.patches = modality, items, tokens, patches
        self.peak, self.outputs, self.words = peak, outputs, words

    def profile_peak(self, text_peak: int) -> int:
        """The profile run's torch peak with this pass before a text step whose own peak is `text_peak`."""
        return max(self.peak, text_peak + self.outputs)


def limits(given: str | None) -> dict[str, int]:
    """--limit-mm-per-prompt as JSON: {modality: count} (an int, or a dict with `count`); unreadable: {}."""
    if not given:
        return {}
    import json  # only where the line has the flag

    try:
        data = json.loads(given)
    except ValueError:
        return {}
    out: dict[str, int] = {}
    if isinstance(data, dict):
        for k, v in data.items():
            n = v.get("count") if isinstance(v, dict) else v
            if isinstance(n, int) and not isinstance(n, bool):
                out[str(k)] = n
    return out


def factor_pair_tokens(max_pixels: int, unit: int) -> int:
    """Tokens of the image with the most features under `max_pixels` (qwen2_vl.py get_image_size_with_most_features):
    the largest n <= max_pixels // unit^2 whose closest factor pair has an aspect ratio of at most MAX_RATIO."""
    for n in range(max_pixels // (unit * unit), 0, -1):
        d = math.isqrt(n)
        while n % d:
            d -= 1
        if (n // d) / d <= MAX_RATIO:
            return n
    return 0


def tokens_per_item(p: dict[str, Any]) -> dict[str, int | None]:
    """{modality: tokens per item of the most features}: None where the record lacks what sizes it."""
    if p["family"] == "siglip":
        return {"image": int(p["tokens_per_image"]) if p.get("tokens_per_image") else None}
    unit = int(p["patch_size"]) * int(p.get("merge_size") or 1)
    t = int(p.get("temporal_patch_size") or 1)
    image = factor_pair_tokens(int(p["max_pixels"]), unit) if p.get("max_pixels") else None
    video = factor_pair_tokens(int(p["video_max_pixels"]) // t, unit) if p.get("video_max_pixels") else None
    return {"image": image, "video": video}


def patches_per_item(p: dict[str, Any], tokens: int) -> int:
    """The tower's sequence length for one item of `tokens` output tokens."""
    if p["family"] == "siglip":
        return (int(p["image_size"]) // int(p["patch_size"])) ** 2
    return tokens * int(p.get("merge_size") or 1) ** 2  # one temporal patch: an image, or 2 frames of a video


def bytes_per_patch(p: dict[str, Any], tp: int) -> tuple[int, str]:
    """Bytes alive per patch at the tower's peak (module docstring), and which phase sets it."""
    h, i = int(p["hidden_size"]), int(p["intermediate_size"])
    t = int(p.get("temporal_patch_size") or 1)
    values = 3 * t * int(p["patch_size"]) ** 2
    mlp = 4 * h + 2 * math.ceil(i / tp)
    attn = 4 * h + (8 if p["family"] == "qwen-vit" else 4) * math.ceil(h / tp)
    phase = "attention" if attn > mlp else "MLP"
    held = 0
    if p["family"] == "qwen-vit":
        deep = int(p.get("deepstack") or 0)
        merge = int(p.get("merge_size") or 1)
        out_hidden = int(p["output_size"]) // (1 + deep)  # output_size is out_hidden x (1 + the mergers)
        rotary = h // int(p["num_heads"]) if p.get("num_heads") else 0  # cos + sin, head_dim / 2 each
        held = rotary + deep * out_hidden // (merge * merge)
    return ACT_BYTES * (max(mlp, attn) + held + values), phase


def encoder_pass(model: Any, settings: dict[str, Any], batched_tokens: int, max_num_seqs: int,
                 max_model_len: int | None, *, tp: int = 1, workspace: int = 0) -> tuple[Pass | None, str]:
    """The pass vLLM makes for the model's first encoder that kb sizes, or (None, why not); `workspace`: torch's
    cuBLAS workspace, which the pass's first matmul allocates (module docstring)."""
    encs = [e if isinstance(e, dict) else e.model_dump() for e in getattr(model, "encoders", None) or []]
    enc = next((e for e in encs if e.get("profile")), None)
    if enc is None:
        tower = encs[0].get("tower") if encs else None
        return None, (f"the start-up encoder pass of {tower} is not sized (kb has not read its module code for it)"
                      if tower else "")
    p = enc["profile"]
    given = limits(settings.get("limit_mm_per_prompt"))
    allowed = [m for m in enc["modalities"] if given.get(m, DEFAULT_LIMIT) > 0]
    toks = tokens_per_item(p)
    known: dict[str, int] = {m: n for m in allowed if (n := toks.get(m))}
    unknown = [m for m in allowed if m in toks and not toks[m]]
    if not known:
        return None, (f"the start-up encoder pass of {enc['tower']} is not sized: the processor's pixel limits are "
                      "not recorded for this checkpoint")
    modality, tokens = max(known.items(), key=lambda kv: (kv[1], kv[0]))
    budget = max(batched_tokens, tokens)
    limit = given.get(modality, DEFAULT_LIMIT)
    per_prompt = max(1, min(limit, (max_model_len or tokens * limit) // tokens))
    items = max(1, min(budget // tokens, max_num_seqs * per_prompt))
    patches = items * patches_per_item(p, tokens)
    per_patch, phase = bytes_per_patch(p, tp)
    peak = patches * per_patch + workspace
    outputs = items * tokens * int(p["output_size"]) * ACT_BYTES
    words = (f"encoder pass {items} {modality} item{'s' if items > 1 else ''} x {tokens:,} tokens ({patches:,} "
             f"patches) through {enc['tower']}: {peak / 1e9:,.2f} GB at its {phase} ({per_patch:,} B/patch + "
             f"cuBLAS workspace), outputs kept {outputs / 1e9:,.2f} GB")
    if unknown:
        words += f" ({', '.join(unknown)}: tokens per item not recorded, not compared)"
    return Pass(modality, items, tokens, patches, peak, outputs, words), ""


def applies(acct_pass: str, run: str, settings: dict[str, Any]) -> bool:
    """Whether this release's runner makes the pass: `acct_pass` is the accounting line's encoder_pass, `run` the
    runner the release gives the model; --skip-mm-profiling turns it off (gpu_model_runner.py:6243 in 0.24.0)."""
    if settings.get("skip_mm_profiling"):
        return False
    return acct_pass == "all" or (acct_pass == "V1" and run == "V1")
