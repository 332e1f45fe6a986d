"""Rank kernels by measured latency for the solver: `rank(kb, gpu, config, kernels=None)`, or `rank_rows` on
records already picked for one accelerator (the query image's BenchRows).

Pure Python (no torch, no numpy): it reads bench measurement records from the loaded KB, picks the measured
configuration that matches the query, and applies the separation rule (stats.separate).

`config` takes any of: phase ("prefill" | "decode", default decode), batch, ctx (the sequence length for
prefill, the KV length for decode; also seq_len / kv_len), heads, kv_heads, head_dim, dtype, causal, graphs.
Keys given must match exactly, except the length and batch, where the nearest measured value (on a log
scale) is taken and the answer says so; keys not given are filled from the preferred slice (head_dim 128,
bf16, 8 KV heads, eager, causal prefill) where measured, else from what was measured.
`kernels`, when given, restricts the ranking to those kernel ids (the ones that passed every gate).
"""

from __future__ import annotations

import math

from kbtool.measure.grid import Config
from kbtool.measure.stats import THRESHOLD, separate
from kbtool.measure.table import table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.kb import KB

RULE = (f"winner only if second place is >= {round((THRESHOLD - 1) * 100)}% slower and the lower bound of a "
        "seeded 95% bootstrap interval on that ratio is > 1 (seed 000)")
NEAREST = ("length", "batch")
PREFERRED: dict[str, Any] = {"head_dim": 128, "dtype": "bf16", "kv_heads": 8, "graphs": False, "causal": True}


def _wanted(config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    phase = str(config.get("phase") or "decode")
    want: dict[str, Any] = {}
    length = config.get("ctx") or config.get("seq_len") or config.get("kv_len") or config.get("length")
    if length is not None:
        want["length"] = int(length)
    for key in ("batch", "heads", "kv_heads", "head_dim"):
        if config.get(key) is not None:
            want[key] = int(config[key])
    for key in ("causal", "graphs"):
        if config.get(key) is not None:
            want[key] = bool(config[key])
    if config.get("dtype") is not None:
        want["dtype"] = str(config["dtype"])
    return phase, want


def _distance(c: Config, want: dict[str, Any]) -> tuple[float, ...]:
    exact = sum(getattr(c, k) != v for k, v in want.items() if k not in NEAREST)
    near = sum(abs(math.log2(max(getattr(c, k), 1) / max(v, 1))) for k, v in want.items() if k in NEAREST)
    pref = sum(getattr(c, k) != v for k, v in PREFERRED.items() if k not in want)
    return (exact, near, pref)


def rank(kb: KB, gpu: str, config: dict[str, Any], kernels: list[str] | None = None) -> dict[str, Any] | None:
    """The measured ranking for the configuration nearest to `config` on `gpu`; None when nothing matches.

    Returns {gpu, phase, config, exact, nearest, verdict, winner, ratio, lower_bound, ranking: [{backend,
    kernel, median_us, samples, measurement}], cannot_run: [{backend, kernel, outcome, measurement}],
    measurements, rule}. A configuration whose given keys other than length and batch differ is not used.
    """
    from kbtool.measure.table import bench_records

    acc = kb.resolve(gpu, "accelerator").id
    return rank_rows(bench_records(kb, acc), acc, config, kernels)


def rank_rows(records: list[Any], acc: str, config: dict[str, Any], kernels: list[str] | None = None) \
        -> dict[str, Any] | None:
    """`rank` over the bench records of accelerator `acc` (anything with a measurement record's attributes)."""
    phase, want = _wanted(config)
    recs = [r for r in records if r.phase == phase]
    if kernels is not None:
        allowed = set(kernels)
        recs = [r for r in recs if r.kernel in allowed]
    tab, configs = table(recs)
    if not configs:
        return None
    key = min(configs, key=lambda k: (_distance(configs[k], want), k))
    chosen = configs[key]
    if _distance(chosen, want)[0] > 0:
        return None
    by_backend = {str(r.conditions["backend"]): r for r in recs if Config.from_conditions(phase, r.conditions)
                  and Config.from_conditions(phase, r.conditions) == chosen}
    sep = separate(key, tab[key])
    ranking = [{"backend": r.backend, "kernel": by_backend[r.backend].kernel, "median_us": round(r.median, 3),
                "samples": r.samples, "measurement": r.ref} for r in sep.ranking]
    cannot = [{"backend": b, "kernel": by_backend[b].kernel, "outcome": by_backend[b].outcome,
               "measurement": by_backend[b].id} for b in sep.cannot_run]
    nearest = {k: getattr(chosen, k) for k in NEAREST if k in want and getattr(chosen, k) != want[k]}
    return {
        "gpu": acc,
        "phase": phase,
        "config": {**chosen.conditions()},
        "exact": not nearest,
        "nearest": nearest,
        "verdict": sep.verdict,
        "winner": sep.winner if sep.separated else None,
        "fastest": sep.winner,
        "ratio": round(sep.ratio, 4) if sep.ratio is not None else None,
        "lower_bound": round(sep.lower, 4) if sep.lower is not None else None,
        "ranking": ranking,
        "cannot_run": cannot,
        "measurements": sorted(r.id for r in by_backend.values()),
        "rule": RULE,
    }
