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

    __slots__ = ("backends", "called", "chosen", "differ", "engine_cache", "gate_counts", "img", "judges",
                 "kernels", "memory_left", "model", "notes", "phase_note", "q")

    def __init__(self, img: Image, q: Query, model: ModelV | None, kernels: list[KernelV]) -> None:
        self.img, self.q, self.model, self.kernels = img, q, model, kernels
        self.backends: list[BackendV] = []
        self.judges: dict[str, Judge] = {}  # per phase, for the accelerator being solved
        self.differ: set[str] = set()  # variables whose values differ between those phases
        self.gate_counts: dict[str, int] = {}  # kernel id -> reject/caveat claims on it and its families
        self.memory_left: int | None = None  # bytes left after weights and KV, for the workspace gate
        self.engine_cache: dict[str, Any] = {}  # what the engine resolved once per accelerator
        self.notes: list[str] = []  # remarks for the answer being solved (a capacity not recorded, ...)
        self.phase_note: str | None = None  # the phases the kernels asked serve, where no --phase was given
        self.called: dict[str, Any] = {}  # backend id -> its kernels as called here (kbtool/solve/calls.py)


def ctx_over_model(cx: Ctx) -> tuple[int, int] | None:
    """(ctx, the model's limit) when --ctx is beyond what the model serves (its max_position_embeddings, RoPE
    scaling included), else None. The engines refuse a longer context than the one they derive from config.json
    (vLLM: vllm/config/model.py _get_and_verify_max_len) unless told to override it."""
    model, ctx = cx.model, cx.q.ctx
    limit = model.max_context if model is not None else None
    if model is None or not ctx or not limit or ctx <= limit:
        return None
    return ctx, limit
