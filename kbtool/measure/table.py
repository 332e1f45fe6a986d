"""Bench measurements as tables: {configuration key: {backend: Timing}}, for ranking and reports.

Reads anything with a bench measurement record's attributes (id, phase, conditions, outcome, samples,
metrics): record models, or the query image's BenchRow (kbtool/solve/image.py), so ranking needs no pydantic.
"""

from __future__ import annotations

from kbtool.measure.grid import Config
from kbtool.measure.stats import Table, Timing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from kbtool.model import Measurement


def timing(m: Any) -> Timing:
    """A backend counts as run when its outcome is OK, it has samples, and its correctness check did not fail."""
    ok = m.outcome == "OK" and bool(m.samples) and m.metrics.get("correct") is not False
    return Timing(tuple(m.samples), ok, m.id)


def table(records: Iterable[Any], phase: str | None = None) -> tuple[Table, dict[str, Config]]:
    """{config key: {backend: Timing}} and the configurations by key. Later record ids (later dates) win."""
    tab: dict[str, dict[str, Timing]] = {}
    configs: dict[str, Config] = {}
    for m in sorted(records, key=lambda r: r.id):
        if phase and m.phase != phase:
            continue
        cfg = Config.from_conditions(str(m.phase), m.conditions)
        if cfg is None:
            continue
        key = cfg.key()
        configs[key] = cfg
        tab.setdefault(key, {})[str(m.conditions["backend"])] = timing(m)
    return tab, configs


def is_bench(m: Measurement) -> bool:
    """A measurement written by `kb bench run`: an outcome, a phase and a backend among its conditions."""
    return m.outcome is not None and "backend" in m.conditions and m.phase is not None


def bench_records(records: Iterable[Any], accelerator: str | None = None) -> list[Measurement]:
    """The bench measurements among `records` (of one accelerator, when given), by id."""
    from kbtool.model import Measurement

    out = [r for r in records if isinstance(r, Measurement) and is_bench(r)]
    if accelerator:
        out = [r for r in out if r.accelerator == accelerator]
    return sorted(out, key=lambda r: r.id)
