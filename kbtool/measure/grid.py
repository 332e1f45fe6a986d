"""Benchmark grids: prefill (batch, seq len, head dim, dtype, causal) and decode (batch, KV len, KV heads,
head dim, dtype, CUDA Graphs). Pure Python; the GPU code lives in backends.py and worker.py.

A configuration is identified by `key()`, a stable string built from its fields; two GPUs share a
configuration when their keys are equal. The backend is not part of the configuration.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

Phase = Literal["prefill", "decode"]

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}

# Query heads: the study's decode slice has 32 query heads over 8 or 32 KV heads. Prefill uses 16 heads (MHA).
PREFILL_HEADS = 16
DECODE_HEADS = 32


@dataclass(frozen=True)
class Config:
    """One point of a grid. `length` is the sequence length (prefill) or the KV length (decode)."""

    phase: Phase
    batch: int
    length: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype: str
    causal: bool = False
    graphs: bool = False

    def key(self) -> str:
        n = "n" if self.phase == "prefill" else "kv"
        parts = [self.phase, f"b{self.batch}", f"{n}{self.length}", f"h{self.heads}", f"hkv{self.kv_heads}",
                 f"d{self.head_dim}", self.dtype]
        if self.phase == "prefill":
            parts.append("causal" if self.causal else "full")
        else:
            parts.append("graph" if self.graphs else "eager")
        return "-".join(parts)

    def conditions(self) -> dict[str, Any]:
        """The record's `conditions` mapping (same key names as the seed-000 measurement records)."""
        out: dict[str, Any] = {"batch": self.batch}
        out["seq_len" if self.phase == "prefill" else "kv_len"] = self.length
        out.update(heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim, dtype=self.dtype)
        if self.phase == "prefill":
            out["causal"] = self.causal
        else:
            out["graphs"] = self.graphs
        return out

    def kv_bytes(self) -> int:
        """The study's decode byte model 2 * B * H_kv * N * D * s (K and V read once)."""
        return 2 * self.batch * self.kv_heads * self.length * self.head_dim * DTYPE_BYTES[self.dtype]

    def flops(self) -> float:
        """Matrix FLOPs of the forward pass: 4 * B * H * Nq * Nk * D, halved for causal prefill."""
        nq = self.length if self.phase == "prefill" else 1
        f = 4.0 * self.batch * self.heads * nq * self.length * self.head_dim
        return f / 2 if self.causal else f

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Config:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def from_conditions(cls, phase: str, cond: dict[str, Any]) -> Config | None:
        """Rebuild a configuration from a record's conditions; None when a field is missing."""
        try:
            length = cond["seq_len"] if phase == "prefill" else cond["kv_len"]
            return cls(phase="prefill" if phase == "prefill" else "decode", batch=int(cond["batch"]),
                       length=int(length), heads=int(cond["heads"]), kv_heads=int(cond["kv_heads"]),
                       head_dim=int(cond["head_dim"]), dtype=str(cond["dtype"]),
                       causal=bool(cond.get("causal", False)), graphs=bool(cond.get("graphs", False)))
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Grid:
    name: str
    prefill: tuple[Config, ...]
    decode: tuple[Config, ...]

    def configs(self) -> list[Config]:
        return [*self.prefill, *self.decode]


def prefill_grid(batches: list[int], lengths: list[int], head_dims: list[int], dtypes: list[str],
                 causal: list[bool], heads: int = PREFILL_HEADS) -> list[Config]:
    return [Config("prefill", b, n, heads, heads, d, t, causal=c)
            for b, n, d, t, c in itertools.product(batches, lengths, head_dims, dtypes, causal)]


def decode_grid(batches: list[int], lengths: list[int], kv_heads: list[int], head_dims: list[int],
                dtypes: list[str], graphs: list[bool], heads: int = DECODE_HEADS) -> list[Config]:
    return [Config("decode", b, n, heads, h, d, t, graphs=g)
            for b, n, h, d, t, g in itertools.product(batches, lengths, kv_heads, head_dims, dtypes, graphs)]


def quick() -> Grid:
    """Sized for one call of under 10 minutes on an H200 (176 attempts x 3 process launches, after the
    JIT warm-up).

    It keeps the cells the study's H100 statements need: prefill at N=256 and N=8192 (batch 4),
    decode at batch 1 over N=512..16384 (FlashInfer with page size = KV length) and batch 32 at N=16384,
    and a batch x KV-length map for the fastest decode backend.
    """
    pre = prefill_grid([4], [256, 1024, 4096, 8192], [128], ["bf16"], [False, True])
    dec = decode_grid([1, 8, 32, 64], [512, 2048, 16384], [8], [128], ["bf16"], [False])
    dec += decode_grid([1, 32], [512, 16384], [8], [128], ["bf16"], [True])
    return Grid("quick", tuple(pre), tuple(dec))


def full() -> Grid:
    """The study's grid: prefill batch 1/4/16 x N 256..8192; decode batch 1/8/32/64 x KV 512..16384."""
    pre = prefill_grid([1, 4, 16], [256, 512, 1024, 2048, 4096, 8192], [64, 128], ["bf16", "fp16"],
                       [False, True])
    dec = decode_grid([1, 8, 32, 64], [512, 1024, 2048, 4096, 8192, 16384], [8, 32], [64, 128],
                      ["bf16", "fp16"], [False, True])
    return Grid("full", tuple(pre), tuple(dec))

