"""Weight bytes of a model as deployed, and the memory answer of one GPU (Fit), whatever engine sizes the pool:
parameters x bytes per parameter by format, per parameter group where the model record splits them."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.model import Model
    from kbtool.solve.image import ModelV

WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5 + 2 / 128,
                "nvfp4": 0.5 + 1 / 16, "mxfp4": 0.5 + 1 / 32}
WEIGHT_FORMATS = tuple(WEIGHT_BYTES)
QUANTIZABLE = ("attention", "mlp", "experts")


def bytes_per_param(dtype: str, group_size: int | None = None) -> float:
    if dtype == "int4" and group_size:
        return 0.5 + 2 / group_size
    return WEIGHT_BYTES[dtype]


def fp32_loaded_as(model: Model | ModelV, weights: str | None, dtype: str | None, auto: str) -> str | None:
    """The weight format an engine loads an unquantized checkpoint at where it differs from the record's: `weights`
    where the user gave one; float32 where --dtype asks for it (a 2-byte checkpoint is upcast as it loads: vLLM
    0.33.0 vllm/config/model.py:2509-2510 "Upcasting"); for a float32 checkpoint otherwise `auto`, the 2-byte dtype
    the engine's --dtype auto picks; `weights` (None) for any other checkpoint."""
    if weights is not None or model.weight_dtype not in ("bf16", "fp16", "fp32"):
        return weights
    if dtype == "fp32":
        return "fp32"
    return auto if model.weight_dtype == "fp32" else weights


def encoders(model: Model | ModelV) -> list[tuple[str, int]]:
    """(modality, parameters) of each encoder the record counts (a record's models or the image's dicts)."""
    out = []
    for e in getattr(model, "encoders", None) or []:
        d = e if isinstance(e, dict) else e.model_dump()
        out.append((str(d["modality"]), int(d["parameters"])))
    return out


def tower_bytes(model: Model | ModelV, deploy: str | None = None) -> tuple[int, str]:
    """Bytes of the encoders at the dtype the engine loads them: the model dtype (`deploy` where it is bf16, fp16
    or fp32), since quantized checkpoints leave the towers out of the quantization (their ignore /
    modules_to_not_convert lists; Llama 4's vLLM class builds its tower with quant_config=None); and their words."""
    enc = encoders(model)
    if not enc:
        return 0, ""
    base = deploy if deploy in ("bf16", "fp16", "fp32") else model.unquantized_dtype
    n = sum(p for _m, p in enc)
    kinds = " + ".join(dict.fromkeys(m for m, _p in enc))
    return int(n * WEIGHT_BYTES[base]), f"{kinds} tower{'s' if len(enc) > 1 else ''} {n / 1e9:,.2f}B x " \
                                        f"{WEIGHT_BYTES[base]:g} B ({base})"


def weight_bytes(model: Model | ModelV, deploy: str | None = None, *, text_only: str | None = None
                 ) -> tuple[int, str]:
    """Total weight bytes at `deploy` (None: as released) and how they were computed: the safetensors headers'
    exact bytes where the record has them (a float32 checkpoint's loaded at 2 B per value where `deploy` is bf16
    or fp16), else parameters x bytes plus the encoders (tower_bytes). `text_only`: the serve-line flag that
    makes the engine skip the encoders (they are then left out, from the exact bytes too)."""
    total, how = _weight_bytes(model, deploy)
    tb, thow = tower_bytes(model, deploy)
    if not tb:
        return total, how
    exact = "safetensors headers" in how  # the checkpoint's exact bytes hold the towers already
    if text_only and exact:
        return total - tb, f"{how} - {thow} ({text_only}: not loaded)"
    if text_only or exact:
        return total, how
    return total + tb, f"{how} + {thow}"


def _weight_bytes(model: Model | ModelV, deploy: str | None = None) -> tuple[int, str]:
    pg = model.parameter_groups
    groups: dict[str, int] = dict(pg.items()) if pg is not None else {}  # a record's model or the image's dict
    groups = {k: v for k, v in groups.items() if v}
    gs = getattr(model, "quant_group_size", None)
    exact = model.weight_bytes
    if exact is not None and (deploy is None or deploy == model.weight_dtype == "fp32"):
        return exact, f"{exact:,} B exact (the checkpoint's safetensors headers)"
    f32 = getattr(model, "weight_bytes_f32", None)
    if exact is not None and f32 and model.weight_dtype == "fp32" and deploy in ("bf16", "fp16"):
        total = exact - f32 // 2  # the engine casts each float32 tensor to its 2-byte dtype as it loads it
        return total, (f"the checkpoint's safetensors headers ({exact:,} B) with their F32 tensors ({f32:,} B) at "
                       f"2 B per value, as the engine loads a float32 checkpoint ({deploy})")
    fmt = deploy or model.weight_dtype
    base = model.unquantized_dtype if fmt not in ("bf16", "fp16", "fp32") else fmt
    if not groups:
        total = int(model.parameters * bytes_per_param(fmt, gs))
        return total, f"{model.parameters / 1e9:,.2f}B params x {bytes_per_param(fmt, gs):g} B ({fmt})"
    mixed = getattr(model, "group_dtypes", None) or {}
    kept = getattr(model, "kept_unquantized", None) or {}
    if deploy is None and (mixed or kept):
        return _mixed_bytes(groups, fmt, base, set(model.quantized or QUANTIZABLE), mixed, kept)
    quantized = set(QUANTIZABLE if deploy else (model.quantized or QUANTIZABLE))
    if fmt in ("bf16", "fp16", "fp32"):
        quantized = set(groups)
    q = sum(n for g, n in groups.items() if g in quantized)
    rest = sum(n for g, n in groups.items() if g not in quantized)
    total = int(q * bytes_per_param(fmt, gs) + rest * WEIGHT_BYTES[base])
    how = f"{q / 1e9:,.2f}B params x {bytes_per_param(fmt, gs):g} B ({fmt})"
    if rest:
        kept = ", ".join(sorted(set(groups) - quantized))
        how += f" + {rest / 1e9:,.2f}B x {WEIGHT_BYTES[base]:g} B ({base}: {kept})"
    bias = expert_bias_params(model)
    if bias:
        total += int(bias * WEIGHT_BYTES[base])
        how += f" + expert biases {bias / 1e6:,.1f}M x {WEIGHT_BYTES[base]:g} B ({base})"
    return total, how


def experts_of(model: Model | ModelV) -> dict[str, Any]:
    """The model's `experts` block as a dict ({} for a dense model): a dict in the query image, the pydantic block
    on a Model."""
    raw: Any = getattr(model, "experts", None)
    return (raw.model_dump() if hasattr(raw, "model_dump") else raw) or {}


def expert_shape(model: Model | ModelV) -> tuple[int, int, int, int] | None:
    """(MoE layers, routed experts, expert width, hidden size) of an MoE model whose record has them, else None.
    The width is kb's intermediate_size (the MLP width a token passes through) over the experts a token uses."""
    ex = experts_of(model)
    active, shared = int(ex.get("active") or 0), int(ex.get("shared") or 0)
    inter, hidden = getattr(model, "intermediate_size", None), getattr(model, "hidden_size", None)
    if not active or not inter or not hidden:
        return None
    return int(ex["moe_layers"]), int(ex["routed"]), int(inter) // (active + shared), int(hidden)


def expert_bias_params(model: Model | ModelV) -> int:
    """The biases of a model whose routed experts carry them (`experts.bias`: gate/up 2 x width and down hidden per
    expert per MoE layer), which the parameter groups leave out; 0 otherwise."""
    shape = expert_shape(model) if experts_of(model).get("bias") else None
    if shape is None:
        return 0
    layers, routed, width, hidden = shape
    return layers * routed * (2 * width + hidden)


def expert_bytes(model: Model | ModelV, deploy: str | None = None) -> int:
    """Bytes of the routed experts (their parameter group and biases) at the format they are loaded in, as
    _weight_bytes counts them; 0 for a dense model or a record without an `experts` parameter group."""
    pg = model.parameter_groups
    n = int((dict(pg.items()) if pg is not None else {}).get("experts") or 0)
    if not n or (model.weight_bytes is not None and deploy is None):
        return 0
    fmt = deploy or model.weight_dtype
    base = model.unquantized_dtype if fmt not in ("bf16", "fp16", "fp32") else fmt
    mixed = getattr(model, "group_dtypes", None) or {}
    kept_by = getattr(model, "kept_unquantized", None) or {}
    quantized = set(QUANTIZABLE if deploy else (model.quantized or QUANTIZABLE))
    bias = expert_bias_params(model) * WEIGHT_BYTES[base]
    if deploy is None and (mixed or kept_by):  # _mixed_bytes: each group at its own format, no bias term
        f = mixed.get("experts") or (fmt if "experts" in quantized else base)
        kept = min(int(kept_by.get("experts") or 0), n) if f != base else 0
        return int((n - kept) * WEIGHT_BYTES[f] + kept * WEIGHT_BYTES[base])
    if fmt in ("bf16", "fp16", "fp32") or "experts" in quantized:
        return int(n * bytes_per_param(fmt, getattr(model, "quant_group_size", None)) + bias)
    return int(n * WEIGHT_BYTES[base] + bias)


def _mixed_bytes(groups: dict[str, int], fmt: str, base: str, quantized: set[str], mixed: dict[str, str],
                 kept: dict[str, int]) -> tuple[int, str]:
    """A mixed-precision checkpoint as released: each group at its own format (`quantized` at `fmt`, `mixed` at
    theirs, the rest at `base`), less the parameters of a quantized group the checkpoint keeps at `base`."""
    by_fmt: dict[str, int] = {}
    names: dict[str, list[str]] = {}
    for g, n in groups.items():
        f = mixed.get(g) or (fmt if g in quantized else base)
        k = min(kept.get(g, 0), n) if f != base else 0
        by_fmt[f] = by_fmt.get(f, 0) + n - k
        names.setdefault(f, []).append(g)
        if k:
            by_fmt[base] = by_fmt.get(base, 0) + k
            names.setdefault(base, []).append(f"{k / 1e6:,.1f}M of {g}")
    order = sorted(by_fmt, key=lambda f: (f == base, -by_fmt[f]))
    total = int(sum(by_fmt[f] * WEIGHT_BYTES[f] for f in order))
    how = " + ".join(f"{by_fmt[f] / 1e9:,.2f}B x {WEIGHT_BYTES[f]:g} B ({f}: {', '.join(names[f])})" for f in order)
    return total, how


class Fit:
    """The memory answer for one GPU (bytes per GPU)."""

    def __init__(self, *, fits: bool | None, kv_bytes: int, kv_bytes_per_token: float, weights_bytes: int,
                 weights_dtype: str, reserve_bytes: int, pool_bytes: int, pool_tokens: int, capacity_bytes: int,
                 max_ctx: int, max_ctx_memory: int, ctx_limit: str, max_sequences: int | None, formula: str,
                 notes: list[str], engine_report: Any = None) -> None:
        self.fits, self.kv_bytes, self.kv_bytes_per_token = fits, kv_bytes, kv_bytes_per_token
        self.weights_bytes, self.weights_dtype, self.reserve_bytes = weights_bytes, weights_dtype, reserve_bytes
        self.pool_bytes, self.pool_tokens, self.capacity_bytes = pool_bytes, pool_tokens, capacity_bytes
        self.max_ctx, self.max_ctx_memory, self.ctx_limit = max_ctx, max_ctx_memory, ctx_limit
        self.max_sequences, self.formula, self.notes = max_sequences, formula, notes
        self.engine_report = engine_report
