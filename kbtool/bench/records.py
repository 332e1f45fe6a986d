"""Measurement records for `kb bench`: one per run, built from it and written only by the tool.

A run is one record, records/measurements/<date>-<gpu>-bench-<grid>.yaml: the environment fingerprint once,
the run's grid and copy bandwidth once (`metrics`), and one row per (configuration, backend) attempt. An
attempt that ran has quantity `latency` (value: median of the per-process medians, us; samples: the
per-process medians); one that did not has quantity `outcome` and the outcome class as its value. A later
run of the same grid on the same day and GPU replaces the file.

Readers get `BenchCase`s (kbtool.measure.table.bench_records): one per row, with the record's shared values
filled in and an id that cites the row, `<record id>#<configuration key>-<backend>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kbtool.bench.backends import BY_NAME
from kbtool.errors import ProbeError
from kbtool.measure.stats import median
from kbtool.measure.table import bench_records
from kbtool.model import Measurement
from kbtool.probe.environment import gpu_slug

if TYPE_CHECKING:
    from kbtool.bench.runner import Attempt, BenchResult
    from kbtool.kb import KB

SOURCE_REF = "kbtool/bench (kb bench run)"


def record_id(date: str, env: dict[str, Any], grid: str) -> str:
    return f"{date}-{gpu_slug(env)}-bench-{grid}"


def _environment(env: dict[str, Any]) -> dict[str, Any]:
    from kbtool.probe.evidence import environment_model

    return environment_model(env).model_dump(mode="json", exclude_none=True)


def row(result: BenchResult, a: Attempt) -> dict[str, Any]:
    """The row of one attempt (what the run shares, its environment, grid and copy bandwidth, is not in it)."""
    cfg = a.config
    ok = a.outcome == "OK" and bool(a.samples)
    metrics: dict[str, Any] = {"repeats": list(a.outcomes)}
    if a.kernels:
        metrics["kernels"] = a.kernels
    for key in ("dispatch", "correct", "rel_l2_err", "extra_bytes", "profiler_error"):
        if key in a.metrics:
            metrics[key] = a.metrics[key]
    if a.max_abs_err is not None:
        metrics["max_abs_err"] = a.max_abs_err
    peaks = a.metrics.get("peak_bytes_samples") or []
    if peaks:
        metrics["peak_bytes"] = int(median(peaks))
    value: float | str = a.outcome
    if ok:
        t = median(a.samples)
        value = round(t, 3)
        if cfg.phase == "decode":
            bw = cfg.kv_bytes() / (t * 1e-6) / 1e9
            metrics.update(kv_bytes=cfg.kv_bytes(), bandwidth_gbs=round(bw, 1))
            if result.copy_bandwidth_gbs:
                metrics["bandwidth_fraction"] = round(bw / result.copy_bandwidth_gbs, 4)
        else:
            metrics["tflops"] = round(cfg.flops() / (t * 1e-6) / 1e12, 2)
    out: dict[str, Any] = {
        "quantity": "latency" if ok else "outcome",
        "value": value,
        "unit": "us" if ok else "class",
        "kernel": BY_NAME[a.backend].kernel,
        "phase": cfg.phase,
        "conditions": {**cfg.conditions(), "backend": a.backend},
        "samples": [round(x, 3) for x in a.samples],
        "outcome": a.outcome,
        "metrics": metrics,
    }
    if a.message and not ok:
        out["message"] = a.message
    return out


def build(result: BenchResult, artifacts: list[str] | None = None) -> Measurement:
    """The run's record: one row per attempt that ran (an attempt the time budget never reached has no
    outcome: it is not a measurement and gets no row)."""
    env = result.environment
    run: dict[str, Any] = {"grid": result.grid}
    if result.copy_bandwidth_gbs:
        run["copy_bandwidth_gbs"] = round(result.copy_bandwidth_gbs, 1)
    data: dict[str, Any] = {
        "id": record_id(result.started[:10], env, result.grid),
        "kind": "measurement",
        "name": f"kb bench {result.grid} grid on {env.get('gpu')}",
        "basis": "measured",
        "environment": _environment(env),
        "started": result.started,
        "metrics": run,
        "rows": [row(result, a) for a in result.attempts if a.outcomes],
        "artifacts": list(artifacts or []),
        "sources": [{"type": "probe", "ref": SOURCE_REF}],
    }
    if env.get("accelerator"):
        data["accelerator"] = env["accelerator"]
    if not data["rows"]:
        raise ProbeError(f"bench run {data['id']}: no attempt ran, so there is nothing to record")
    try:
        return Measurement.model_validate(data)
    except ValidationError as exc:
        raise ProbeError(f"bench record {data['id']} does not validate: {exc}") from exc


def text(record: Measurement, path: Path) -> str:
    """The record as YAML, in the canonical form `kb fmt` would give where the formatter can place the file."""
    from kbtool.store.writer import dump

    data = record.model_dump(mode="json", exclude_defaults=True, by_alias=True)
    data = {"id": data.pop("id"), "kind": "measurement", **{k: v for k, v in data.items() if k != "kind"}}
    out = dump(data)
    try:
        from kbtool.fmt.core import canonical

        return canonical(out, path)
    except Exception:
        return out


def write(record: Measurement, folder: Path) -> Path:
    """Write the run's record (replacing a same-day run of the same grid on the same GPU); returns its path."""
    from kbtool.store.writer import atomic_write, file_lock

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record.id}.yaml"
    with file_lock(path):
        atomic_write(path, text(record, path))
    return path


# ---- reading back -------------------------------------------------------------------------------------


def gpus(kb: KB) -> list[str]:
    """Accelerators that have bench measurement records."""
    return sorted({c.accelerator for c in bench_records(kb) if c.accelerator})
