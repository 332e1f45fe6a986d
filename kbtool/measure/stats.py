"""The study's statistics, in pure Python (no numpy): the separation rule, winners, winner changes and
transfer cost.

Inputs are plain mappings so that the same code serves `kb bench winners`, `kb bench transfer` and the
solver's `rank`:

    Table = {config_key: {backend: Timing}}

where a Timing holds the per-process medians of one (GPU, configuration, backend) and whether it ran.

Separation (seed 000, "Winner and transfer cost"): with b1, b2 the fastest and second-fastest backends by
median latency, R = T(b2) / T(b1); a configuration has a winner only if R >= 1.10 and the lower bound of a
95% bootstrap interval on R is above 1. The bootstrap resamples each backend's per-process medians with
replacement, recomputes both medians and their ratio; it is seeded from `seed` and the configuration key,
so the answer does not depend on the order configurations are processed in.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

THRESHOLD = 1.10
MIN_SAMPLES = 2  # per-process medians needed on each of the top two before a winner can be called
DEFAULT_SEED = 0
DEFAULT_RESAMPLES = 2000

Verdict = Literal["separated", "no-clear-winner", "single", "none"]


@dataclass(frozen=True)
class Timing:
    """Per-process median latencies (any unit, the same for all backends of a table) of one backend."""

    samples: tuple[float, ...] = ()
    ok: bool = True
    ref: str | None = None  # measurement record id

    @property
    def median(self) -> float:
        return median(self.samples)


Table = Mapping[str, Mapping[str, Timing]]


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("median of no values")
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def percentile(xs: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method); q in [0, 100]."""
    if not xs:
        raise ValueError("percentile of no values")
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _rng(seed: int, key: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def bootstrap_ratio_lower(fast: Sequence[float], slow: Sequence[float], *, key: str = "", seed: int = DEFAULT_SEED,
                          resamples: int = DEFAULT_RESAMPLES, level: float = 95.0) -> float:
    """Lower bound of the two-sided `level`% percentile bootstrap interval on median(slow) / median(fast)."""
    if not fast or not slow:
        raise ValueError("bootstrap needs samples on both sides")
    rng = _rng(seed, key)
    ratios = []
    for _ in range(resamples):
        f = median([fast[rng.randrange(len(fast))] for _ in fast])
        s = median([slow[rng.randrange(len(slow))] for _ in slow])
        ratios.append(s / f)
    return percentile(ratios, (100.0 - level) / 2)


@dataclass
class Ranked:
    backend: str
    median: float
    samples: int
    ref: str | None = None


@dataclass
class Separation:
    """The verdict on one configuration of one GPU."""

    key: str
    verdict: Verdict
    ranking: list[Ranked] = field(default_factory=list)
    ratio: float | None = None  # R = T(b2) / T(b1)
    lower: float | None = None  # L95(R)
    cannot_run: list[str] = field(default_factory=list)

    @property
    def winner(self) -> str | None:
        """The fastest backend, whether or not it is separated (None when nothing ran)."""
        return self.ranking[0].backend if self.ranking else None

    @property
    def separated(self) -> bool:
        return self.verdict == "separated"


def separate(key: str, timings: Mapping[str, Timing], *, seed: int = DEFAULT_SEED,
             threshold: float = THRESHOLD, resamples: int = DEFAULT_RESAMPLES) -> Separation:
    ran = {b: t for b, t in timings.items() if t.ok and t.samples}
    cannot = sorted(b for b in timings if b not in ran)
    ranking = sorted((Ranked(b, t.median, len(t.samples), t.ref) for b, t in ran.items()),
                     key=lambda r: (r.median, r.backend))
    if not ranking:
        return Separation(key, "none", [], cannot_run=cannot)
    if len(ranking) == 1:
        return Separation(key, "single", ranking, cannot_run=cannot)
    b1, b2 = ranking[0], ranking[1]
    ratio = b2.median / b1.median
    if min(b1.samples, b2.samples) < MIN_SAMPLES:  # one process launch says nothing about the spread
        return Separation(key, "no-clear-winner", ranking, ratio, None, cannot)
    lower = bootstrap_ratio_lower(ran[b1.backend].samples, ran[b2.backend].samples, key=key, seed=seed,
                                  resamples=resamples)
    verdict: Verdict = "separated" if ratio >= threshold and lower > 1.0 else "no-clear-winner"
    return Separation(key, verdict, ranking, ratio, lower, cannot)


@dataclass
class WinnerSummary:
    results: list[Separation]

    @property
    def comparable(self) -> list[Separation]:
        """Configurations where at least two backends ran (the denominator of the clear-winner share)."""
        return [r for r in self.results if r.verdict in ("separated", "no-clear-winner")]

    @property
    def separated(self) -> list[Separation]:
        return [r for r in self.results if r.separated]

    @property
    def share(self) -> float | None:
        c = len(self.comparable)
        return len(self.separated) / c if c else None


def winners(table: Table, *, seed: int = DEFAULT_SEED) -> WinnerSummary:
    return WinnerSummary([separate(k, table[k], seed=seed) for k in sorted(table)])


@dataclass
class Transfer:
    """Source GPU -> target GPU over their shared configurations."""

    shared: int = 0
    changes_all: int = 0  # configurations where both GPUs ran >= 1 backend and the fastest differs
    compared_all: int = 0
    changes_separated: int = 0  # configurations with a separated winner on both GPUs
    compared_separated: int = 0
    costs: list[tuple[str, float]] = field(default_factory=list)  # (config key, target T(pick) / best T)
    cannot_run: list[tuple[str, str]] = field(default_factory=list)  # (config key, source pick)

    @property
    def cost_values(self) -> list[float]:
        return [c for _, c in self.costs]

    @property
    def median_cost(self) -> float | None:
        return median(self.cost_values) if self.costs else None

    @property
    def p95_cost(self) -> float | None:
        return percentile(self.cost_values, 95) if self.costs else None


def transfer(source: Table, target: Table, *, seed: int = DEFAULT_SEED) -> Transfer:
    """Winner changes and transfer cost C = T_target(source pick) / min_b T_target(b) (seed 000).

    A source pick that did not run on the target (not OK, or not attempted) is counted in `cannot_run`,
    not given a ratio.
    """
    out = Transfer()
    for key in sorted(set(source) & set(target)):
        out.shared += 1
        s = separate(key, source[key], seed=seed)
        t = separate(key, target[key], seed=seed)
        if s.winner is None:
            continue
        if t.winner is None:
            out.cannot_run.append((key, s.winner))
            continue
        out.compared_all += 1
        out.changes_all += s.winner != t.winner
        if s.separated and t.separated:
            out.compared_separated += 1
            out.changes_separated += s.winner != t.winner
        pick = target[key].get(s.winner)
        if pick is None or not pick.ok or not pick.samples:
            out.cannot_run.append((key, s.winner))
            continue
        out.costs.append((key, pick.median / t.ranking[0].median))
    return out
