"""The memory block of an answer: which KV format applies, then kvcache.fit."""

from __future__ import annotations

from kbtool.solve.answer import Memory
from kbtool.solve.kvcache import fit, kv_model

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.answer import KernelAnswer
    from kbtool.solve.context import Ctx
    from kbtool.solve.image import AcceleratorV


def _flashmla(kid: str) -> bool:
    return kid.startswith("flashmla-")


def memory_for(cx: Ctx, acc: AcceleratorV, env: dict[str, Any], kernels: list[KernelAnswer],
               assumed: dict[str, Any]) -> tuple[Memory | None, list[str]]:
    """Memory for the model on this accelerator; None (with a note) when there is no model or no capacity."""
    q, model = cx.q, cx.model
    if model is None:
        return None, []
    capacity = acc.capacity_bytes()
    if capacity is None:
        return None, [f"{acc.id} has no memory capacity recorded; the KV fit is not computed"]
    kv = env["kv_dtype"]
    has_mla = any(g.type == "mla" for g in model.layers)
    notes: list[str] = []
    mla_format = None
    if has_mla and kv == "fp8_e4m3":
        chosen = q.kernels and all(_flashmla(k) for k in q.kernels)
        if chosen:
            mla_format = "flashmla-fp8"
        elif any(_flashmla(k.id) and k.status in ("ok", "caveat") for k in kernels):
            alt = kv_model(model, kv, q.gpus, "flashmla-fp8")
            notes.append(f"with FlashMLA's fixed fp8 format (--kernel flashmla-...) KV/token would be "
                         f"{alt.bytes_per_token():,.0f} B")
    batch = q.batch or 1
    if q.batch is None:
        assumed["batch"] = 1
    ctx = q.ctx
    if ctx is None and model.max_context:
        ctx = model.max_context
        assumed["ctx"] = f"{ctx} (the model's max context, for the memory check only)"
    f = fit(model, kv, capacity, ctx, batch=batch, tp=q.gpus, utilization=q.utilization, mla_format=mla_format)
    cap_note = "driver-reported" if acc.driver_memory else "marketed GB x 1e9"
    mem = Memory(fits=f.fits, kv_bytes=f.kv_bytes, kv_bytes_per_token=f.kv_bytes_per_token,
                 weights_bytes=f.weights_bytes, available_bytes=f.available_bytes, capacity_bytes=f.capacity_bytes,
                 max_ctx=f.max_ctx, formula=f.formula,
                 notes=[*f.notes, f"capacity: {cap_note}; no paged-block rounding or activation memory"])
    return mem, notes
