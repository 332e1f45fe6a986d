"""Bench measurements as tables: {configuration key: {backend: Timing}}, for ranking and reports.

Reads anything with a bench case's attributes (id, phase, conditions, outcome, samples, metrics): the
`BenchCase`s of measurement records (`bench_records`), or the query image's BenchRow (kbtool/solve/image.py),
so ranking needs no pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kbtool.measure.grid import Config
from kbtool.measure.stats import Table, Timing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

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


@dataclass
class BenchCase:
    """One bench attempt as readers see it (table, rank, plots): a row of a bench run's measurement record with
    the record's shared values filled in, and `id` citing the row: `<record id>#<configuration key>-<backend>`."""

    id: str
    record: str
    accelerator: str | None
    kernel: str | None
    phase: str | None
    conditions: dict[str, Any]
    outcome: str | None
    samples: list[float]
    value: Any = None
    unit: str | None = None
    message: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


def cases(m: Measurement) -> list[BenchCase]:
    """The bench cases of a measurement record: its rows with an outcome, a phase and a backend among their
    conditions (none for a seed table or a probe's measured values)."""
    out = []
    for r in m.cells():
        if r.outcome is None or r.phase is None or "backend" not in r.conditions:
            continue
        cfg = Config.from_conditions(r.phase, r.conditions)
        key = f"{cfg.key()}-{r.conditions['backend']}" if cfg else str(r.conditions["backend"])
        out.append(BenchCase(f"{m.id}#{key}", m.id, r.accelerator, r.kernel, r.phase, r.conditions, r.outcome,
                             list(r.samples), r.value, r.unit, r.message, r.metrics))
    return out


def bench_records(records: Iterable[Any], accelerator: str | None = None) -> list[BenchCase]:
    """The bench cases of the measurement records among `records` (of one accelerator, when given), by id."""
    from kbtool.model import Measurement

    out = [c for r in records if isinstance(r, Measurement) for c in cases(r)]
    if accelerator:
        out = [c for c in out if c.accelerator == accelerator]
    return sorted(out, key=lambda c: c.id)
