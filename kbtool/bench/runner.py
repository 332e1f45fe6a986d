"""`kb bench run`: time every installed backend over a grid on the local GPU.

Process layout (the study's "medians over separate process launches"): for each repeat r, for each backend
family (torch SDPA + Triton, FlashInfer, FA-4, ...), one worker process (kbtool.probe.runner.Worker running
kbtool.bench.attempt) times all of that family's (configuration, backend) attempts in turn; its median per
attempt is one sample. Before any timing, a parallel warm-up compiles every JIT variant once. An attempt
that crashes, hangs or runs out of memory kills only its worker, and the rest go to a fresh one. Repeat 0
also profiles the kernel names (dispatch check) and checks correctness against fp32. Refusals are
deterministic, so an UNSUPPORTED attempt is not retried in later repeats. A time budget stops new work so
the run fits one call; the repeats are outermost, so a short budget loses repeats, not configurations.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbtool.bench.backends import BY_NAME, for_phase, installed, predicted_bytes
from kbtool.errors import ProbeError
from kbtool.measure.grid import Config, Grid

MODULE = "kbtool.bench.attempt"
ROOT = Path(__file__).resolve().parents[2]
MEMORY_SHARE = 0.85  # predicted need above this share of device memory => OOM_PREDICTED


@dataclass
class Attempt:
    """One (configuration, backend) over all its repeats."""

    config: Config
    backend: str
    outcomes: list[str] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)  # per-process medians, us
    message: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    kernels: list[str] = field(default_factory=list)
    max_abs_err: float | None = None

    @property
    def outcome(self) -> str:
        if "OK" in self.outcomes:
            return "OK"
        return self.outcomes[0] if self.outcomes else "NOT_RUN"


@dataclass
class BenchResult:
    environment: dict[str, Any]
    grid: str
    started: str
    finished: str = ""
    copy_bandwidth_gbs: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    stopped_early: str | None = None


Progress = Callable[[str], None]


class NoGpuError(ProbeError):
    """No CUDA GPU here: `kb bench run` says so and exits 0."""


def plan(grid: Grid, backends: list[str] | None, memory_bytes: int | None,
         is_installed: Callable[[str], bool] | None = None) -> tuple[list[Attempt], list[str]]:
    """Every (configuration, backend) attempt of the grid, and the backends skipped as not installed.

    Attempts predicted not to fit are marked OOM_PREDICTED here and never run.
    """
    check = is_installed or (lambda name: installed(BY_NAME[name]))
    missing: list[str] = []
    attempts: list[Attempt] = []
    for cfg in grid.configs():
        for b in for_phase(cfg.phase, backends):
            if not check(b.name):
                if b.name not in missing:
                    missing.append(b.name)
                continue
            a = Attempt(cfg, b.name)
            if memory_bytes and predicted_bytes(b.name, cfg) > MEMORY_SHARE * memory_bytes:
                a.outcomes.append("OOM_PREDICTED")
                a.message = f"predicted {predicted_bytes(b.name, cfg) / 2**30:.1f} GiB of {memory_bytes / 2**30:.1f}"
            attempts.append(a)
    return attempts, missing


def family(backend: str) -> str:
    """Backends timed in the same worker process in one repeat: those that load the same library.

    Every (configuration, backend) still gets one sample per repeat from a process of its own repeat;
    grouping only saves process start-up (importing torch and the JIT libraries, creating the context).
    """
    if backend.startswith("sdpa-") or backend == "triton":
        return "torch"
    if backend.startswith("flashinfer"):
        return "flashinfer"
    return backend


JIT_BACKENDS = ("flashinfer-fa2", "flashinfer-fa3", "flashinfer-decode", "fa4", "triton")


def _variant(cfg: Config) -> tuple[Any, ...]:
    """What a JIT compile depends on (not batch or length)."""
    return (cfg.phase, cfg.head_dim, cfg.dtype, cfg.causal, cfg.graphs, cfg.heads // cfg.kv_heads)


def warm_up(attempts: list[Attempt], *, budget_s: float, progress: Progress | None = None,
            root: Path = ROOT) -> None:
    """Compile every JIT backend's kernel variants once, backends in parallel, before anything is timed.

    FlashInfer, FA-4 (with its disk cache on) and Triton keep what they compile on disk, so the timed
    processes that follow load kernels instead of compiling them. Nothing here is recorded.
    """
    import threading

    from kbtool.probe.runner import Worker, worker_env

    jobs: dict[str, list[Config]] = {}
    for a in attempts:
        if a.backend in JIT_BACKENDS and not a.outcomes:
            cfgs = jobs.setdefault(a.backend, [])
            if all(_variant(c) != _variant(a.config) for c in cfgs):
                cfgs.append(a.config)
            else:  # keep the smallest configuration of each variant
                i = next(i for i, c in enumerate(cfgs) if _variant(c) == _variant(a.config))
                if (a.config.batch, a.config.length) < (cfgs[i].batch, cfgs[i].length):
                    cfgs[i] = a.config
    if not jobs:
        return
    env = worker_env(len(jobs), root)
    deadline = time.monotonic() + budget_s
    say = progress or (lambda _m: None)

    def one(backend: str, cfgs: list[Config]) -> None:
        worker: Any = None
        for cfg in cfgs:
            left = deadline - time.monotonic()
            if left < 5:
                break
            try:
                if worker is None:
                    worker = Worker(MODULE, cwd=root, env=env)
                    worker.wait_ready(left)
                ans = worker.ask({"backend": backend, "config": cfg.to_json(), "warm": True}, left)
                say(f"warm-up {backend} {cfg.key()}: {ans.get('outcome')} in {ans.get('seconds')} s")
                if ans.get("outcome") in ("ERROR", "OOM"):
                    worker.close()
                    worker = None
            except Exception as gone:
                say(f"warm-up {backend} {cfg.key()}: {getattr(gone, 'outcome', 'ERROR')}")
                if worker is not None:
                    worker.kill()
                    worker.close()
                worker = None
        if worker is not None:
            worker.close()

    threads = [threading.Thread(target=one, args=(b, c), daemon=True) for b, c in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def execute(attempts: list[Attempt], *, repeats: int, budget_s: float, seed: int = 0,
            progress: Progress | None = None, first_timeout_s: float = 300.0, timeout_s: float = 120.0,
            root: Path = ROOT) -> str | None:
    """Run the attempts in place. Returns why it stopped early, or None."""
    from kbtool.probe.runner import Worker, worker_env

    deadline = time.monotonic() + budget_s
    env = worker_env(1, root)
    say = progress or (lambda _m: None)
    families = list(dict.fromkeys(family(a.backend) for a in attempts))
    for r in range(repeats):
        for fam in families:
            todo = [a for a in attempts
                    if family(a.backend) == fam and a.outcome not in ("OOM_PREDICTED", "UNSUPPORTED")]
            if r > 0:
                todo = [a for a in todo if "OK" in a.outcomes]  # later repeats only re-time what ran
            if not todo:
                continue
            worker: Any = None
            for a in todo:
                backend = a.backend
                left = deadline - time.monotonic()
                if left < 5:
                    if worker is not None:
                        worker.close()
                    return f"time budget of {budget_s:.0f} s used up in repeat {r + 1} ({backend})"
                limit = min(first_timeout_s if r == 0 else timeout_s, left)
                case = {"backend": backend, "config": a.config.to_json(), "repeat": r, "seed": seed,
                        "check": r == 0, "profile": r == 0}
                try:
                    if worker is None:
                        worker = Worker(MODULE, cwd=root, env=env)
                        worker.wait_ready(limit)
                    answer = worker.ask(case, limit)
                except Exception as gone:  # kbtool.probe.runner's worker-gone error: outcome + message
                    outcome = str(getattr(gone, "outcome", "ERROR"))
                    _record(a, {"outcome": outcome, "message": str(getattr(gone, "message", gone))}, r)
                    if worker is not None:
                        worker.kill()
                        worker.close()
                    worker = None
                    say(f"r{r} {backend} {a.config.key()}: {outcome}")
                    continue
                _record(a, answer, r)
                say(f"r{r} {backend} {a.config.key()}: {answer.get('outcome')}"
                    + (f" {answer['metrics']['latency_us']:.1f} us" if answer.get("outcome") == "OK" else ""))
                if answer.get("outcome") in ("ERROR", "OOM"):
                    worker.close()
                    worker = None
            if worker is not None:
                worker.close()
    return None


def _record(a: Attempt, answer: dict[str, Any], repeat: int) -> None:
    outcome = str(answer.get("outcome") or "ERROR")
    a.outcomes.append(outcome)
    metrics = dict(answer.get("metrics") or {})
    if outcome == "OK" and isinstance(metrics.get("latency_us"), (int, float)):
        a.samples.append(float(metrics["latency_us"]))
        peaks = a.metrics.setdefault("peak_bytes_samples", [])
        if "peak_bytes" in metrics:
            peaks.append(metrics["peak_bytes"])
        if repeat == 0:
            for key in ("dispatch", "correct", "rel_l2_err", "profiler_error", "extra_bytes"):
                if key in metrics:
                    a.metrics[key] = metrics[key]
            a.kernels = list(answer.get("kernels") or [])
            a.max_abs_err = answer.get("max_abs_err")
    elif outcome != "OK" and a.message is None:
        a.message = str(answer.get("message") or "")[:1000] or None


def measure_copy(progress: Progress | None = None, root: Path = ROOT) -> float | None:
    """Device-to-device copy bandwidth (GB/s, read + write) of 512 MiB, median of three processes' medians."""
    from kbtool.probe.runner import Worker, worker_env

    values = []
    for _ in range(3):
        w = Worker(MODULE, cwd=root, env=worker_env(1, root))
        try:
            w.wait_ready(120)
            ans = w.ask({"backend": "__copy__", "bytes": 512 * 2**20}, 120)
        except Exception as exc:
            if progress:
                progress(f"copy bandwidth: {getattr(exc, 'message', exc)}")
            w.kill()
            w.close()
            continue
        w.close()
        if ans.get("outcome") == "OK":
            values.append(float(ans["metrics"]["bandwidth_gbs"]))
    if not values:
        return None
    values.sort()
    return values[len(values) // 2]


def run_bench(grid: Grid, *, backends: list[str] | None = None, repeats: int = 3, budget_s: float = 540.0,
              seed: int = 0, progress: Progress | None = None, warm_budget_s: float = 240.0) -> BenchResult:
    """Fingerprint the machine, measure copy bandwidth, run the grid. Raises NoGpuError without a GPU."""
    from datetime import UTC, datetime

    from kbtool.probe.environment import fingerprint

    unknown = [b for b in backends or [] if b not in BY_NAME]
    if unknown:
        raise ProbeError(f"unknown backend(s): {', '.join(unknown)}", fix=f"choose from {', '.join(BY_NAME)}")
    start = time.monotonic()
    os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")  # FA-4 keeps compiled kernels on disk
    env = fingerprint(ROOT)
    if not env.get("gpu"):
        raise NoGpuError(f"no CUDA GPU here: {env.get('reason', 'unknown reason')}",
                         fix="run `kb bench run` on a machine with an NVIDIA GPU and torch")
    result = BenchResult(env, grid.name, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    result.copy_bandwidth_gbs = measure_copy(progress)
    attempts, missing = plan(grid, backends, env.get("memory_bytes"))
    if progress and missing:
        progress(f"not installed, skipped: {', '.join(missing)}")
    result.attempts = attempts
    warm_up(attempts, budget_s=min(warm_budget_s, budget_s - (time.monotonic() - start)), progress=progress)
    left = budget_s - (time.monotonic() - start)
    result.stopped_early = execute(attempts, repeats=repeats, budget_s=left, seed=seed, progress=progress)
    result.finished = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return result
