"""Model: a model's attention layout, enough to size its KV cache and weights exactly."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import Record as _Record
from .common import Strict, given, schema_rule

LayerType = Literal["full", "sliding", "linear", "mla"]


class LayerGroup(Strict):
    """`count` layers of one attention type."""

    model_config = schema_rule({"allOf": [
        {"if": {"properties": {"type": {"const": t}}}, "then": given(*need)}
        for t, need in (("full", ("kv_heads", "head_dim")), ("sliding", ("kv_heads", "head_dim", "window")),
                        ("linear", ("state_bytes",)), ("mla", ("kv_lora_rank", "rope_dim")))]})

    type: LayerType = Field(description="full, sliding (window), linear (fixed state) or mla")
    count: int = Field(ge=1, le=10_000, description="Number of layers of this type")
    kv_heads: int | None = Field(default=None, ge=1, le=4096, description="KV heads (full/sliding)")
    head_dim: int | None = Field(default=None, ge=1, le=4096, description="K head dim (full/sliding)")
    head_dim_v: int | None = Field(default=None, ge=1, le=4096, description="V head dim if it differs")
    window: int | None = Field(default=None, ge=1, description="Sliding window, tokens")
    kv_lora_rank: int | None = Field(default=None, ge=1, description="MLA latent rank")
    rope_dim: int | None = Field(default=None, ge=0, description="MLA decoupled RoPE dim")
    state_bytes: int | None = Field(
        default=None, ge=0, description="Linear layers: fixed state per sequence per layer, bytes"
    )

    @model_validator(mode="after")
    def _fields_for_type(self) -> LayerGroup:
        need = {
            "full": ("kv_heads", "head_dim"),
            "sliding": ("kv_heads", "head_dim", "window"),
            "linear": ("state_bytes",),
            "mla": ("kv_lora_rank", "rope_dim"),
        }[self.type]
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"a '{self.type}' layer group needs {', '.join(missing)}")
        return self


class Model(_Record):
    kind: Literal["model"] = Field(description="Record kind")
    family: str = Field(description="Model family")
    parameters: int = Field(ge=1, description="Total parameter count")
    weight_dtype: Literal["bf16", "fp16", "fp8", "mxfp4", "nvfp4", "int4", "fp32"] = Field(
        description="Dtype of the released weights"
    )
    weight_bytes: int | None = Field(
        default=None, ge=1, description="Exact size of the released weights where it differs from params x dtype"
    )
    num_heads: int = Field(ge=1, description="Query heads")
    head_dim: int = Field(ge=1, description="Query/key head dim the attention kernel sees")
    max_context: int | None = Field(default=None, ge=1, description="Native maximum context, tokens")
    layers: list[LayerGroup] = Field(min_length=1, description="Layer groups by attention type")
