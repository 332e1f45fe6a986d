"""The memory model (design.md §4): KV bytes per token, weights, available memory, fit and max_ctx.

Follows the engines' own accounting (vLLM kv_cache_interface.py, engine-gates.md §3.5):
- full / sliding attention: kv_heads x (head_dim + head_dim_v) x bytes per layer per token (2 x ... when equal);
  tensor parallel divides the KV heads but never below one per GPU; sliding layers hold at most `window` tokens;
- MLA: one latent per layer, (kv_lora_rank + rope_dim) x bytes, no factor 2, replicated on every TP rank;
  where FlashMLA's fp8 cache format is in use, its fixed bytes per token per layer (656 for d_qk 576);
- linear attention: a fixed state per sequence per layer, independent of context.
No paged-block rounding; the numbers are the floor an engine needs for the KV cache itself.
"""

from __future__ import annotations

import math

from kbtool.vocab import DTYPE_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kbtool.model import Model
    from kbtool.solve.image import ModelV

# FlashMLA's fixed fp8 KV layout in bytes per token per layer, by d_qk (kv_lora_rank + rope_dim):
# 576 -> 512 fp8 NoPE + 4 x fp32 scales + 64 bf16 RoPE = 656; 512 -> 448 + 128 + 8 = 584.
# Sources: claim flashmla-fp8-kv-bytes-per-token; vLLM MLAAttentionSpec fp8_ds_mla page size.
FLASHMLA_FP8_BYTES = {576: 656, 512: 584}
UNBOUNDED_CTX = 1 << 30  # reported as max_ctx when memory does not limit the context


class KvModel:
    """KV bytes as a function of context for one model on one GPU (per sequence)."""

    __slots__ = ("fixed", "notes", "per_token", "terms", "windowed")

    def __init__(self) -> None:
        self.per_token = 0.0  # bytes per token from layers that grow with context
        self.windowed: list[tuple[float, int]] = []  # (bytes per token, window)
        self.fixed = 0.0  # bytes per sequence independent of context (linear-attention state)
        self.terms: list[str] = []  # formula pieces with numbers
        self.notes: list[str] = []

    def per_sequence(self, ctx: int) -> float:
        return self.per_token * ctx + sum(b * min(ctx, w) for b, w in self.windowed) + self.fixed

    def bytes_per_token(self) -> float:
        """Bytes per token of context before any window caps (what grows at small ctx)."""
        return self.per_token + sum(b for b, _ in self.windowed)


def _tp_heads(kv_heads: int, tp: int) -> int:
    return max(1, math.ceil(kv_heads / tp))


def _b(x: float) -> str:
    return f"{x:g}" if x != int(x) else f"{int(x)}"


def kv_model(model: Model | ModelV, kv_dtype: str, tp: int = 1, mla_format: str | None = None) -> KvModel:
    """Per-GPU KV accounting of `model` with the cache in `kv_dtype` under tensor parallel `tp`.

    `mla_format="flashmla-fp8"` uses FlashMLA's fixed fp8 layout for MLA layers.
    """
    nbytes = DTYPE_BYTES[kv_dtype]
    out = KvModel()
    for g in model.layers:
        if g.type in ("full", "sliding"):
            assert g.kv_heads is not None and g.head_dim is not None
            heads = _tp_heads(g.kv_heads, tp)
            hv = g.head_dim_v or g.head_dim
            per = heads * (g.head_dim + hv) * nbytes * g.count
            heads_txt = f"{heads} kv_heads" + (f" (of {g.kv_heads}, tp {tp})" if tp > 1 else "")
            if hv == g.head_dim:
                term = f"2 x {g.count} layers x {heads_txt} x {g.head_dim} head_dim x {_b(nbytes)} B"
            else:
                term = (f"{g.count} layers x {heads_txt} x ({g.head_dim} + {hv}) head_dims x {_b(nbytes)} B")
            if g.type == "full":
                out.per_token += per
                out.terms.append(f"full: {term} = {per:,.0f} B/token")
            else:
                assert g.window is not None
                out.windowed.append((per, g.window))
                out.terms.append(f"sliding: {term} = {per:,.0f} B/token, capped at {g.window:,} tokens")
            if tp > g.kv_heads:
                out.notes.append(f"tp {tp} > {g.kv_heads} KV heads: each GPU keeps one KV head (replicated)")
        elif g.type == "mla":
            assert g.kv_lora_rank is not None and g.rope_dim is not None
            d = g.kv_lora_rank + g.rope_dim
            fixed = FLASHMLA_FP8_BYTES.get(d) if mla_format == "flashmla-fp8" else None
            if fixed is not None:
                per = float(fixed * g.count)
                out.terms.append(f"mla (FlashMLA fp8 format): {g.count} layers x {fixed} B = {per:,.0f} B/token")
            else:
                if mla_format == "flashmla-fp8":
                    out.notes.append(f"no FlashMLA fp8 layout recorded for d_qk {d}; sized at 1 byte per element")
                per = d * nbytes * g.count
                out.terms.append(f"mla: {g.count} layers x ({g.kv_lora_rank} kv_lora_rank + {g.rope_dim} rope_dim)"
                                 f" x {_b(nbytes)} B = {per:,.0f} B/token (one latent, no factor 2)")
            out.per_token += per
            if tp > 1:
                out.notes.append("MLA latent is replicated on every tensor-parallel rank")
        else:  # linear
            assert g.state_bytes is not None
            per_seq = g.state_bytes * g.count / tp
            out.fixed += per_seq
            tp_txt = f" / tp {tp}" if tp > 1 else ""
            out.terms.append(f"linear: {g.count} layers x {g.state_bytes:,} B state{tp_txt}"
                             f" = {per_seq:,.0f} B/sequence")
            if tp > 1:
                out.notes.append("linear-attention state assumed split across tensor-parallel ranks")
    return out


def weight_bytes(model: Model | ModelV) -> int:
    """Released weight size: `weight_bytes` where recorded, else parameters x bytes of the weight dtype."""
    if model.weight_bytes is not None:
        return model.weight_bytes
    return int(model.parameters * DTYPE_BYTES[model.weight_dtype])


class Fit:
    __slots__ = (
        "available_bytes",
        "capacity_bytes",
        "fits",
        "formula",
        "kv_bytes",
        "kv_bytes_per_token",
        "max_ctx",
        "notes",
        "weights_bytes",
    )

    def __init__(self, fits: bool | None, kv_bytes: int, kv_bytes_per_token: float, weights_bytes: int,
                 available_bytes: int, capacity_bytes: int, max_ctx: int, formula: str, notes: list[str]) -> None:
        self.fits, self.kv_bytes, self.kv_bytes_per_token = fits, kv_bytes, kv_bytes_per_token
        self.weights_bytes, self.available_bytes, self.capacity_bytes = weights_bytes, available_bytes, capacity_bytes
        self.max_ctx, self.formula, self.notes = max_ctx, formula, notes


def max_context(kv: KvModel, available: float, batch: int) -> int:
    """Largest ctx with batch x per_sequence(ctx) <= available (0 if not even one token fits)."""
    if available < batch * kv.per_sequence(1):
        return 0
    if kv.per_token == 0 and batch * kv.per_sequence(UNBOUNDED_CTX) <= available:
        return UNBOUNDED_CTX
    lo, hi = 1, UNBOUNDED_CTX
    while lo < hi:  # largest lo with fits(lo)
        mid = (lo + hi + 1) // 2
        if batch * kv.per_sequence(mid) <= available:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f} GB"


def fit(model: Model | ModelV, kv_dtype: str, capacity: int, ctx: int | None, *, batch: int = 1, tp: int = 1,
        utilization: float = 0.9, mla_format: str | None = None) -> Fit:
    """Whether `batch` sequences of `ctx` tokens fit next to the weights on each of `tp` GPUs."""
    kv = kv_model(model, kv_dtype, tp, mla_format)
    weights = math.ceil(weight_bytes(model) / tp)
    available = int(capacity * utilization) - weights
    need = math.ceil(batch * kv.per_sequence(ctx)) if ctx else 0
    fits = None if ctx is None else (available >= 0 and need <= available)
    mctx = max_context(kv, available, batch) if available > 0 else 0
    per_tok = kv.bytes_per_token()
    wtxt = f"{weight_bytes(model):,} B weights" + (f" / tp {tp}" if tp > 1 else "")
    lines = [f"KV/token = {' + '.join(kv.terms)}"]
    if len(kv.terms) > 1:
        lines.append(f"KV/token = {per_tok:,.0f} B" + (f" + {kv.fixed:,.0f} B/sequence" if kv.fixed else ""))
    if ctx is not None:
        lines.append(f"KV = {need:,} B ({_gb(need)}) for ctx {ctx:,} x batch {batch}")
    lines.append(f"available = {capacity:,} B x {utilization:g} - {wtxt} = {available:,} B ({_gb(available)})")
    notes = list(dict.fromkeys(kv.notes))
    if available <= 0:
        notes.append("the weights alone exceed the usable memory; add GPUs (--gpus) or quantize the weights")
    if mctx == UNBOUNDED_CTX:
        notes.append("memory does not limit the context (no layer grows with it)")
    elif ctx is not None and model.max_context and ctx > model.max_context:
        notes.append(f"ctx {ctx:,} exceeds the model's native max context {model.max_context:,}")
    return Fit(fits, need, per_tok, weights, available, capacity, mctx, "; ".join(lines), notes)
