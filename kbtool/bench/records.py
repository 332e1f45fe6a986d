"""Measurement records for `kb bench`: built from a run, written only by the tool, and read back as tables.

One record per (GPU, configuration, backend) attempt:
records/measurements/<date>-<gpu>-bench-<config key>-<backend>.yaml. An attempt that ran has quantity
`latency` (value: median of the per-process medians, us; samples: the per-process medians); one that did not
has quantity `outcome` and the outcome class as its value. Every record carries the environment fingerprint.
A later run on the same day and GPU replaces the same files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kbtool.bench.backends import BY_NAME
from kbtool.errors import ProbeError
from kbtool.measure.grid import Config
from kbtool.measure.stats import median
from kbtool.measure.table import bench_records
from kbtool.model import Measurement
from kbtool.probe.environment import gpu_slug

if TYPE_CHECKING:
    from kbtool.bench.runner import Attempt, BenchResult
    from kbtool.kb import KB

SOURCE_REF = "kbtool/bench (kb bench run)"


def record_id(date: str, env: dict[str, Any], cfg: Config, backend: str) -> str:
    return f"{date}-{gpu_slug(env)}-bench-{cfg.key()}-{backend}"


def _environment(env: dict[str, Any]) -> dict[str, Any]:
    from kbtool.probe.evidence import environment_model

    return environment_model(env).model_dump(mode="json", exclude_none=True)


def build(result: BenchResult, a: Attempt) -> Measurement:
    env = result.environment
    cfg = a.config
    b = BY_NAME[a.backend]
    ok = a.outcome == "OK" and bool(a.samples)
    metrics: dict[str, Any] = {"repeats": list(a.outcomes), "grid": result.grid}
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
                metrics["copy_bandwidth_gbs"] = round(result.copy_bandwidth_gbs, 1)
                metrics["bandwidth_fraction"] = round(bw / result.copy_bandwidth_gbs, 4)
        else:
            metrics["tflops"] = round(cfg.flops() / (t * 1e-6) / 1e12, 2)
    data: dict[str, Any] = {
        "id": record_id(result.started[:10], env, cfg, a.backend),
        "kind": "measurement",
        "name": f"{cfg.phase} {'latency' if ok else 'outcome'} of {a.backend}, {cfg.key()}, on {env.get('gpu')}",
        "quantity": "latency" if ok else "outcome",
        "value": value,
        "unit": "us" if ok else "class",
        "basis": "measured",
        "kernel": b.kernel,
        "phase": cfg.phase,
        "conditions": {**cfg.conditions(), "backend": a.backend},
        "samples": [round(x, 3) for x in a.samples],
        "outcome": a.outcome,
        "environment": _environment(env),
        "metrics": metrics,
        "sources": [{"type": "probe", "ref": SOURCE_REF}],
    }
    if env.get("accelerator"):
        data["accelerator"] = env["accelerator"]
    if a.message and not ok:
        data["message"] = a.message
    try:
        return Measurement.model_validate(data)
    except ValidationError as exc:
        raise ProbeError(f"bench record {data['id']} does not validate: {exc}") from exc


def _text(record: Measurement, path: Path) -> str:
    from kbtool.store.writer import dump

    data = record.model_dump(mode="json", exclude_defaults=True, by_alias=True)
    data = {"id": data.pop("id"), "kind": "measurement", **{k: v for k, v in data.items() if k != "kind"}}
    text = dump(data)
    try:  # the canonical form `kb fmt` would give, where the formatter can place the file
        from kbtool.fmt.core import canonical

        return canonical(text, path)
    except Exception:
        return text


def write(result: BenchResult, folder: Path) -> list[Path]:
    """Write one record per attempt that ran (replacing same-day files of the same GPU); returns the paths.

    An attempt the time budget never reached has no outcome: it is not a measurement and gets no record."""
    from kbtool.store.writer import atomic_write, file_lock

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for a in result.attempts:
        if not a.outcomes:
            continue
        rec = build(result, a)
        path = folder / f"{rec.id}.yaml"
        with file_lock(path):
            atomic_write(path, _text(rec, path))
        paths.append(path)
    return paths


# ---- reading back -------------------------------------------------------------------------------------


def gpus(kb: KB) -> list[str]:
    """Accelerators that have bench measurement records."""
    return sorted({r.accelerator for r in bench_records(kb) if r.accelerator})
