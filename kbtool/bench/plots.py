"""Matplotlib PNGs in the study's manner, drawn from the bench cases of one GPU (kbtool.measure.table.cases):

- prefill latency against sequence length per backend (one panel per batch x causal),
- decode step time and effective KV bandwidth against KV length per backend (one column per batch), with the
  copy bandwidth measured in the same run as a dashed line,
- the fastest decode backend over batch x KV length, a star where the winner is separated.

The slice shown is head_dim 128, bf16, 8 KV heads and eager execution where the records have it (the study's
figure slice), else the first value present. matplotlib is imported only here, and only when drawing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbtool.measure.grid import Config
from kbtool.measure.stats import separate
from kbtool.measure.table import BenchCase, table

PREFER: dict[str, Any] = {"head_dim": 128, "dtype": "bf16", "kv_heads": 8, "graphs": False}


def _slice(configs: dict[str, Config], phase: str) -> dict[str, Config]:
    """Configurations of one phase restricted to the preferred head_dim / dtype / KV heads / graphs."""
    chosen = {k: c for k, c in configs.items() if c.phase == phase}
    for attr, want in PREFER.items():
        if phase == "prefill" and attr in ("kv_heads", "graphs"):
            continue
        values = {getattr(c, attr) for c in chosen.values()}
        pick = want if want in values else (sorted(values, key=str)[0] if values else None)
        chosen = {k: c for k, c in chosen.items() if getattr(c, attr) == pick}
    return chosen


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(records: Sequence[BenchCase], folder: Path, prefix: str) -> list[Path]:
    """Write the PNGs for one GPU's bench cases; returns the paths written (none for an empty phase)."""
    out: list[Path] = []
    tab, configs = table(records)
    title_gpu = prefix
    pre = _slice(configs, "prefill")
    if pre:
        out.append(_prefill(tab, pre, folder / f"{prefix}-prefill-latency.png", title_gpu))
    dec = _slice(configs, "decode")
    if dec:
        copy = next((m.metrics.get("copy_bandwidth_gbs") for m in records if m.metrics.get("copy_bandwidth_gbs")),
                    None)
        out.append(_decode(tab, dec, folder / f"{prefix}-decode-latency-bandwidth.png", title_gpu, copy))
        out.append(_decode_map(tab, dec, folder / f"{prefix}-decode-fastest-map.png", title_gpu))
    return out


def _series(tab: Any, cfgs: list[Config]) -> dict[str, tuple[list[int], list[float]]]:
    series: dict[str, tuple[list[int], list[float]]] = {}
    for c in sorted(cfgs, key=lambda c: c.length):
        for backend, t in tab.get(c.key(), {}).items():
            if t.ok:
                xs, ys = series.setdefault(backend, ([], []))
                xs.append(c.length)
                ys.append(t.median)
    return series


def _prefill(tab: Any, cfgs: dict[str, Config], path: Path, gpu: str) -> Path:
    plt = _plt()
    panels = sorted({(c.batch, c.causal) for c in cfgs.values()})
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    any_c = next(iter(cfgs.values()))
    for ax, (batch, causal) in zip(axes[0], panels, strict=True):
        sub = [c for c in cfgs.values() if c.batch == batch and c.causal == causal]
        for backend, (xs, ys) in sorted(_series(tab, sub).items()):
            ax.plot(xs, ys, marker="o", label=backend)
        ax.set(xscale="log", yscale="log", xlabel="sequence length", ylabel="median latency (us)",
               title=f"batch {batch}, {'causal' if causal else 'non-causal'}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{gpu}: prefill, {any_c.heads} heads, head_dim {any_c.head_dim}, {any_c.dtype}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _decode(tab: Any, cfgs: dict[str, Config], path: Path, gpu: str, copy_gbs: float | None) -> Path:
    plt = _plt()
    batches = sorted({c.batch for c in cfgs.values()})
    fig, axes = plt.subplots(2, len(batches), figsize=(4.5 * len(batches), 7), squeeze=False)
    any_c = next(iter(cfgs.values()))
    for j, batch in enumerate(batches):
        sub = [c for c in cfgs.values() if c.batch == batch]
        by_len = {c.length: c for c in sub}
        for backend, (xs, ys) in sorted(_series(tab, sub).items()):
            axes[0][j].plot(xs, ys, marker="o", label=backend)
            bw = [by_len[x].kv_bytes() / (y * 1e-6) / 1e9 for x, y in zip(xs, ys, strict=True)]
            axes[1][j].plot(xs, bw, marker="o", label=backend)
        if copy_gbs:
            axes[1][j].axhline(copy_gbs, linestyle="--", color="grey", label="copy bandwidth")
        axes[0][j].set(xscale="log", yscale="log", title=f"batch {batch}", ylabel="step time (us)")
        axes[1][j].set(xscale="log", xlabel="KV length", ylabel="effective KV bandwidth (GB/s)")
        for ax in (axes[0][j], axes[1][j]):
            ax.grid(True, which="both", alpha=0.3)
    axes[1][0].legend(fontsize=7)
    mode = "CUDA Graphs" if any_c.graphs else "eager"
    fig.suptitle(f"{gpu}: decode, {any_c.heads} q heads, {any_c.kv_heads} KV heads, head_dim {any_c.head_dim}, "
                 f"{any_c.dtype}, {mode}; bandwidth = 2*B*Hkv*N*D*s / time")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _decode_map(tab: Any, cfgs: dict[str, Config], path: Path, gpu: str) -> Path:
    plt = _plt()
    batches = sorted({c.batch for c in cfgs.values()})
    lengths = sorted({c.length for c in cfgs.values()})
    cells: dict[tuple[int, int], tuple[str, bool, float]] = {}
    for c in cfgs.values():
        verdict = separate(c.key(), tab.get(c.key(), {}))
        if verdict.winner:
            cells[(c.batch, c.length)] = (verdict.winner, verdict.separated, verdict.ranking[0].median)
    names = sorted({w for w, _, _ in cells.values()})
    index = {n: i for i, n in enumerate(names)}
    grid = [[index[cells[(b, n)][0]] if (b, n) in cells else -1 for n in lengths] for b in batches]
    fig, ax = plt.subplots(figsize=(1.6 * len(lengths) + 2, 0.9 * len(batches) + 2))
    cmap = plt.get_cmap("tab10")
    colors = [[cmap(v % 10) if v >= 0 else (1, 1, 1, 1) for v in row] for row in grid]
    ax.imshow(colors, aspect="auto")
    for i, b in enumerate(batches):
        for j, n in enumerate(lengths):
            if (b, n) in cells:
                w, sep, t = cells[(b, n)]
                ax.text(j, i, f"{w}{' *' if sep else ''}\n{t:.0f} us", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
    ax.set_yticks(range(len(batches)), [str(b) for b in batches])
    ax.set(xlabel="KV length", ylabel="batch")
    any_c = next(iter(cfgs.values()))
    ax.set_title(f"{gpu}: fastest decode backend (lowest median; * = separated winner), "
                 f"{any_c.kv_heads} KV heads, head_dim {any_c.head_dim}, {any_c.dtype}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
