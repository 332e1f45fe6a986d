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


def weight_bytes(model: Model | ModelV, deploy: str | None = None) -> tuple[int, str]:
    """Total weight bytes at `deploy` (None: as released) and how they were computed."""
    pg = model.parameter_groups
    groups: dict[str, int] = dict(pg.items()) if pg is not None else {}  # a record's model or the image's dict
    groups = {k: v for k, v in groups.items() if v}
    gs = getattr(model, "quant_group_size", None)
    if deploy is None and model.weight_bytes is not None:
        return model.weight_bytes, f"{model.weight_bytes:,} B exact (the checkpoint's safetensors headers)"
    fmt = deploy or model.weight_dtype
    base = model.unquantized_dtype if fmt not in ("bf16", "fp16", "fp32") else fmt
    if not groups:
        total = int(model.parameters * bytes_per_param(fmt, gs))
        return total, f"{model.parameters / 1e9:,.2f}B params x {bytes_per_param(fmt, gs):g} B ({fmt})"
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
