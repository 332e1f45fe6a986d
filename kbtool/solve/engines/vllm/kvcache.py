"""KV bytes per token and per sequence, as vLLM's KV cache specs compute them (design.md §4).

Read in vllm-project/vllm `vllm/v1/kv_cache_interface.py` (commits 001cabc1be16 and bc8282e61df2; the tag
v0.33.0 could not be mapped to a commit with the search tools, so these are the stored snapshots):

- FullAttentionSpec: block x kv_heads x (head_size + head_size_v) x dtype bytes per layer; nvfp4 packs each
  head as dim/2 data bytes + dim/16 fp8 scale bytes; a sequence holds cdiv(ctx, block) blocks;
- SlidingWindowSpec: (cdiv(min(window - 1 + max_num_batched_tokens, ctx), block) + 1) blocks;
- ChunkedLocalAttentionSpec: cdiv(min(chunk + max_num_batched_tokens, ctx), block) blocks;
- MLAAttentionSpec: one latent per layer (num_kv_heads 1, head_size kv_lora_rank + rope), no factor 2, the
  same on every tensor-parallel rank; with cache_dtype `fp8_ds_mla` (FlashMLA sparse, DeepSeek-V3.2) a fixed
  656 bytes per token per layer;
- the sparse indexer (vllm/model_executor/models/deepseek_v2.py, DeepseekV32IndexerCache): an MLAAttentionSpec
  of head_size index_head_dim + index_head_dim / 128 x 4 in uint8 (fp8 values + one fp32 scale per 128), so
  132 bytes per token per layer for index_head_dim 128, whatever the KV dtype;
- MambaSpec: sum of prod(shape) x dtype bytes of the state tensors, one page per sequence; in a hybrid model
  vLLM raises the attention block to 16 x cdiv(state page, 16 x attention page per token) and pads the state
  page to that attention page (vllm/platforms/interface.py `_align_hybrid_block_size`, commit c77619938d1c).

Tensor parallel divides KV heads but never below one per GPU, and the state tensors along their TP dim.
"""

from __future__ import annotations

import math

from kbtool.vocab import DTYPE_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from kbtool.model import Model
    from kbtool.solve.image import ModelV

DEFAULT_BLOCK = 16  # vLLM's default block size on CUDA; the kernel alignment of FlashAttention / FlashInfer
MLA_BLOCK = 64  # FlashMLA's page size, which vLLM's MLA backends require
UNBOUNDED_CTX = 1 << 30  # reported as max_ctx when memory does not limit the context
STATE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def _b(x: float) -> str:
    return f"{x:g}" if x != int(x) else f"{int(x)}"


def head_bytes(kv_dtype: str, dim: int) -> float:
    """Bytes of one head's K (or V) vector: vLLM's nvfp4 layout is dim/2 data + dim/16 scale bytes."""
    if kv_dtype == "nvfp4":
        return dim // 2 + dim // 16
    return dim * DTYPE_BYTES[kv_dtype]


class Term:
    """One layer group's share: `per_token` bytes for every token it holds, or a fixed page per sequence."""

    __slots__ = ("cap", "extra_block", "fixed", "kind", "layer_page", "per_token", "text")

    def __init__(self, kind: str, per_token: float, text: str, *, cap: int | None = None,
                 extra_block: bool = False, fixed: float = 0.0, layer_page: float = 0.0) -> None:
        self.kind, self.per_token, self.text, self.cap = kind, per_token, text, cap
        self.extra_block, self.fixed, self.layer_page = extra_block, fixed, layer_page


class KvModel:
    """KV bytes of one model on one GPU, as a function of the context (per sequence)."""

    __slots__ = ("block", "notes", "terms")

    def __init__(self) -> None:
        self.terms: list[Term] = []
        self.notes: list[str] = []
        self.block = DEFAULT_BLOCK

    def tokens(self, t: Term, ctx: int) -> int:
        """Token slots `t` holds for a sequence of `ctx` tokens (whole blocks, as vLLM allocates them)."""
        n = min(ctx, t.cap) if t.cap is not None else ctx
        blocks = -(-n // self.block) + (1 if t.extra_block else 0)
        return blocks * self.block

    def per_sequence(self, ctx: int) -> float:
        return sum(t.fixed if t.kind == "state" else t.per_token * self.tokens(t, ctx) for t in self.terms)

    def bytes_per_token(self) -> float:
        """Bytes per token of context before any window caps (what grows at small ctx)."""
        return sum(t.per_token for t in self.terms)

    def growing(self) -> float:
        """Bytes per token of the layers that grow without limit (full attention, MLA, indexer)."""
        return sum(t.per_token for t in self.terms if t.cap is None and t.kind != "state")

    def fixed(self) -> float:
        return sum(t.fixed for t in self.terms)


def _tp_heads(kv_heads: int, tp: int) -> int:
    return max(1, math.ceil(kv_heads / tp))


def state_page(state: list, tp: int, spec_tokens: int = 0) -> int:  # type: ignore[type-arg]
    """MambaSpec.page_size_bytes at tensor parallel `tp` (each tensor divided along its TP dim); `spec_tokens`: a
    speculative draft's tokens, which widen the conv state to conv_kernel - 1 + num_spec columns
    (MambaStateShapeCalculator, model_executor/layers/mamba/mamba_utils.py: :190 in 0.19.1, :226 in 0.24.0 and
    0.26.0, :293 in 0.34.0, for the gated delta net; Mamba2 the same)."""
    total = 0
    for s in state:
        shape = list(s["shape"] if isinstance(s, dict) else s.shape)
        tp_dim = s["tp_dim"] if isinstance(s, dict) else s.tp_dim
        dtype = s["dtype"] if isinstance(s, dict) else s.dtype
        if spec_tokens and (s["name"] if isinstance(s, dict) else s.name) == "conv":
            shape[-1] += spec_tokens
        if tp_dim is not None:
            shape[tp_dim] = shape[tp_dim] // tp
        total += math.prod(shape) * STATE_BYTES[dtype]
    return total


def kv_model(model: Model | ModelV, kv_dtype: str, tp: int = 1, *, batched_tokens: int,
             mla_format: str | None = None, formats: Mapping[str, tuple[int, str | None]] | None = None) -> KvModel:
    """Per-GPU KV accounting of `model` with the cache in `kv_dtype` under tensor parallel `tp`.

    `mla_format` "fp8_ds_mla" forces FlashMLA's sparse fp8 layout; by default it is used for sparse MLA
    (an indexer present) with an fp8 cache, as vLLM's FLASHMLA_SPARSE backend does. Its size per token and layer
    comes from `formats` (Image.kv_formats: the kernel records' `kv_formats`, name -> (bytes, source)); a layout
    the records do not size is counted as a plain latent in `kv_dtype`, with a note."""
    nbytes = DTYPE_BYTES[kv_dtype]
    out = KvModel()
    attn_page_1 = 0.0  # one attention layer's bytes per token (hybrid page alignment)
    for g in model.layers:
        if g.type in ("full", "sliding", "chunked"):
            assert g.kv_heads is not None and g.head_dim is not None
            heads = _tp_heads(g.kv_heads, tp)
            hv = g.head_dim_v or g.head_dim
            layer = heads * (head_bytes(kv_dtype, g.head_dim) + head_bytes(kv_dtype, hv))
            attn_page_1 = attn_page_1 or layer
            per = layer * g.count
            heads_txt = f"{heads} kv_heads" + (f" (of {g.kv_heads}, tp {tp})" if tp > 1 else "")
            if hv == g.head_dim and kv_dtype != "nvfp4":
                term = f"2 x {g.count} layers x {heads_txt} x {g.head_dim} head_dim x {_b(nbytes)} B"
            else:
                term = f"{g.count} layers x {heads_txt} x ({g.head_dim} + {hv}) head dims at {kv_dtype}"
            if g.type == "full":
                out.terms.append(Term("full", per, f"full: {term} = {per:,.0f} B/token"))
            elif g.type == "sliding":
                assert g.window is not None
                cap = g.window - 1 + batched_tokens
                out.terms.append(Term("sliding", per, f"sliding: {term} = {per:,.0f} B/token, holding "
                                      f"min(ctx, {g.window:,} - 1 + {batched_tokens:,}) tokens + 1 block",
                                      cap=cap, extra_block=True))
            else:
                assert g.chunk is not None
                cap = g.chunk + batched_tokens
                out.terms.append(Term("chunked", per, f"chunked: {term} = {per:,.0f} B/token, holding "
                                      f"min(ctx, {g.chunk:,} + {batched_tokens:,}) tokens", cap=cap))
                out.notes.append("chunked local attention sized as vLLM's hybrid KV cache manager does; releases "
                                 "where VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 0 turn that "
                                 "manager off and hold every token in these layers")
            if tp > g.kv_heads:
                out.notes.append(f"tp {tp} > {g.kv_heads} KV heads: each GPU keeps one KV head (replicated)")
        elif g.type == "mla":
            assert g.kv_lora_rank is not None and g.rope_dim is not None
            out.block = MLA_BLOCK
            d = g.kv_lora_rank + g.rope_dim
            sparse = getattr(g, "index_head_dim", None) is not None
            fmt = mla_format or ("fp8_ds_mla" if sparse and kv_dtype.startswith("fp8") else None)
            sized = (formats or {}).get(fmt) if fmt else None
            if fmt and sized is None:
                out.notes.append(f"the {fmt} layout's size is not in the records (a kernel record's kv_formats): "
                                 f"counted as a plain {kv_dtype} latent")
            if sized is not None:
                size, where = sized
                per = float(size * g.count)
                out.terms.append(Term("mla", per, f"mla ({fmt}): {g.count} layers x {size} B = {per:,.0f} B/token"
                                      + (f" ({where})" if where else "")))
            else:
                per = head_bytes(kv_dtype, d) * g.count
                out.terms.append(Term("mla", per, f"mla: {g.count} layers x ({g.kv_lora_rank} kv_lora_rank + "
                                      f"{g.rope_dim} rope) x {_b(nbytes)} B = {per:,.0f} B/token "
                                      "(one latent, no factor 2)"))
            ihd = getattr(g, "index_head_dim", None)
            if ihd is not None:
                idx = (ihd + ihd // 128 * 4) * g.count
                out.terms.append(Term("indexer", float(idx), f"indexer: {g.count} layers x ({ihd} fp8 + "
                                      f"{ihd // 128 * 4} scale) B = {idx:,} B/token"))
            if tp > 1:
                out.notes.append("MLA latent (and indexer keys) are replicated on every tensor-parallel rank")
    for g in model.layers:
        if g.type != "linear":
            continue
        state = getattr(g, "state", None)
        page = float(state_page(state, tp)) if state else float(g.state_bytes or 0) / tp
        padded = page
        if attn_page_1 and page:
            block = DEFAULT_BLOCK * -(-int(page) // int(DEFAULT_BLOCK * attn_page_1))
            out.block = max(out.block, block)
            padded = block * attn_page_1
        per_seq = padded * g.count
        pad_txt = (f", padded to the {out.block}-token attention page {padded:,.0f} B" if padded != page else "")
        out.terms.append(Term("state", 0.0, f"linear state: {g.count} layers x {page:,.0f} B{pad_txt}"
                              f" = {per_seq:,.0f} B/sequence", fixed=per_seq, layer_page=padded))
        if pad_txt:
            out.notes.append(f"hybrid model: vLLM raises the attention block to {out.block} tokens so that one "
                             "attention page holds a layer's state")
    return out


def max_context(kv: KvModel, available: float, batch: int) -> int:
    """Largest ctx with batch x per_sequence(ctx) <= available (0 if not even one token fits)."""
    if available < batch * kv.per_sequence(1):
        return 0
    if kv.growing() == 0 and batch * kv.per_sequence(UNBOUNDED_CTX) <= available:
        return UNBOUNDED_CTX
    lo, hi = 1, UNBOUNDED_CTX
    while lo < hi:  # largest lo with fits(lo), as vLLM's estimate_max_model_len bisects
        mid = (lo + hi + 1) // 2
        if batch * kv.per_sequence(mid) <= available:
            lo = mid
        else:
            hi = mid - 1
    return lo
