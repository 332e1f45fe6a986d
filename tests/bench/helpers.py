"""Synthetic bench runs for the tests: known latencies on made-up runs, built through records.build."""

from __future__ import annotations

import shutil
from pathlib import Path

from kbtool.bench import records
from kbtool.bench.runner import Attempt, BenchResult
from kbtool.measure.grid import Config
from kbtool.model import Measurement

ROOT = Path(__file__).resolve().parents[2]

ENVS = {
    "nvidia-h100-sxm": {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "accelerator": "nvidia-h100-sxm",
                        "architecture": "sm90", "torch": "2.11.0", "libraries": {"flashinfer": "0.6.18"}},
    "nvidia-h200-sxm": {"gpu": "NVIDIA H200", "compute_capability": "9.0", "accelerator": "nvidia-h200-sxm",
                        "architecture": "sm90", "torch": "2.11.0", "libraries": {"flashinfer": "0.6.18"}},
}


def decode(batch: int = 1, length: int = 512) -> Config:
    return Config("decode", batch, length, 32, 8, 128, "bf16")


def prefill(batch: int = 4, length: int = 256) -> Config:
    return Config("prefill", batch, length, 16, 16, 128, "bf16", causal=False)


def result(gpu: str, rows: list[tuple[Config, str, list[float] | str]], copy: float = 4000.0) -> BenchResult:
    """rows: (config, backend, samples in us or an outcome class)."""
    res = BenchResult(ENVS[gpu], "test", "2026-12-01T10:00:00Z", copy_bandwidth_gbs=copy)
    for cfg, backend, samples in rows:
        a = Attempt(cfg, backend)
        if isinstance(samples, str):
            a.outcomes = [samples]
            a.message = f"{backend} refused"
        else:
            a.outcomes = ["OK"] * len(samples)
            a.samples = list(samples)
            a.metrics = {"correct": True, "dispatch": "match", "peak_bytes_samples": [1000] * len(samples)}
        res.attempts.append(a)
    return res


def build(gpu: str, rows: list[tuple[Config, str, list[float] | str]]) -> Measurement:
    return records.build(result(gpu, rows))


def tree(tmp: Path, results: list[BenchResult]) -> Path:
    """A records tree with the real accelerator records and one measurement record per given run."""
    root = tmp / "records"
    for folder in ("accelerators", "architectures", "kernels"):
        shutil.copytree(ROOT / "records" / folder, root / folder)
    for res in results:
        records.write(records.build(res), root / "measurements")
    return root
