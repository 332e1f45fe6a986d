"""The context of one query: the KB image, the normalized inputs and what is resolved once per query."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.gates import Judge
    from kbtool.solve.image import BackendV, Image, KernelV, ModelV
    from kbtool.solve.query import Query


class Ctx:
    """Everything resolved once per query."""

    __slots__ = ("backends", "chosen", "differ", "engine_cache", "gate_counts", "img", "judges", "kernels",
                 "memory_left", "model", "q")

    def __init__(self, img: Image, q: Query, model: ModelV | None, kernels: list[KernelV]) -> None:
        self.img, self.q, self.model, self.kernels = img, q, model, kernels
        self.backends: list[BackendV] = []
        self.judges: dict[str, Judge] = {}  # per phase, for the accelerator being solved
        self.differ: set[str] = set()  # variables whose values differ between those phases
        self.gate_counts: dict[str, int] = {}  # kernel id -> reject/caveat claims on it and its families
        self.memory_left: int | None = None  # bytes left after weights and KV, for the workspace gate
        self.engine_cache: dict[str, Any] = {}  # what the engine resolved once per accelerator (engines.py)


def ctx_over_model(cx: Ctx) -> str | None:
    """Why --ctx is beyond what the model serves (its max_position_embeddings, RoPE scaling included), or None.

    vLLM refuses a max_model_len above the length it derives from config.json unless
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vllm/config/model.py, _get_and_verify_max_len)."""
    model, ctx = cx.model, cx.q.ctx
    limit = model.max_context if model is not None else None
    if model is None or not ctx or not limit or ctx <= limit:
        return None
    return (f"ctx {ctx:,} exceeds {model.id}'s max_position_embeddings {limit:,} (vLLM refuses a longer "
            "max_model_len unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which it warns against)")
