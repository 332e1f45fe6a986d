"""The memory block of an answer: the vLLM budget (kbtool/solve/budget.py) for the model on this GPU."""

from __future__ import annotations

from kbtool.solve.answer import Memory
from kbtool.solve.budget import fit
from kbtool.solve.kvcache import DEFAULT_BATCHED_TOKENS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.answer import KernelAnswer
    from kbtool.solve.context import Ctx
    from kbtool.solve.image import AcceleratorV


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
    batch = q.batch or 1
    if q.batch is None:
        assumed["batch"] = 1
    tokens = getattr(q, "batched_tokens", None) or DEFAULT_BATCHED_TOKENS
    if getattr(q, "batched_tokens", None) is None:
        assumed["max_num_batched_tokens"] = f"{DEFAULT_BATCHED_TOKENS} (vLLM's default for vllm serve)"
    ctx = q.ctx
    if ctx is None and model.max_context:
        ctx = model.max_context
        assumed["ctx"] = f"{ctx} (the model's max context, for the memory check only)"
    f = fit(model, kv, capacity, ctx, batch=batch, tp=q.gpus, utilization=q.utilization,
            weights=getattr(q, "weights", None), reserve=getattr(q, "reserve", None), batched_tokens=tokens)
    more = None
    if f.fits is False:  # the fewest GPUs that fit, by the same budget: MLA's latent does not shard, weights do
        p = 2 * q.gpus
        while p <= 64 and more is None:
            g = fit(model, kv, capacity, ctx, batch=batch, tp=p, utilization=q.utilization,
                    weights=getattr(q, "weights", None), reserve=getattr(q, "reserve", None), batched_tokens=tokens)
            more = p if g.fits else None
            p *= 2
    cap_note = "driver-reported bytes" if acc.driver_memory else "marketed GB x 1e9 (no driver figure recorded)"
    notes = [*f.notes, f"capacity: {cap_note}"]
    mem = Memory(fits=f.fits, kv_bytes=f.kv_bytes, kv_bytes_per_token=f.kv_bytes_per_token,
                 weights_bytes=f.weights_bytes, available_bytes=f.pool_bytes, capacity_bytes=f.capacity_bytes,
                 max_ctx=f.max_ctx, formula=f.formula, notes=notes, weights_dtype=f.weights_dtype,
                 reserve_bytes=f.reserve_bytes, pool_tokens=f.pool_tokens, max_sequences=f.max_sequences,
                 max_ctx_memory=f.max_ctx_memory, ctx_limit=f.ctx_limit, utilization=q.utilization,
                 gpus_to_fit=more)
    return mem, []
