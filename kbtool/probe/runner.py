"""Run a probe's cases in worker subprocesses, each case under a timeout.

One worker process may serve several cases of a probe in turn (imports and JIT-compiled kernels are then
reused), but a case that crashes, hangs or runs out of memory kills only its worker: the case is recorded as
ERROR, TIMEOUT or OOM with the message, and the remaining cases go to a fresh worker. A probe may allow
several workers at once (spec.workers) so that independent JIT compilations overlap.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kbtool.probe.outcome import describe_exit
from kbtool.probe.spec import Probe
from kbtool.probe.stopping import terminate_raises

STDERR_TAIL = 1500


@dataclass
class CaseResult:
    index: int
    params: dict[str, Any]
    outcome: str
    message: str | None = None
    kernels: list[str] = field(default_factory=list)
    max_abs_err: float | None = None
    seconds: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    def observation(self) -> dict[str, Any]:
        """The shape a probe's judge reads."""
        return {
            "params": self.params,
            "outcome": self.outcome,
            "message": self.message,
            "kernels": self.kernels,
            "max_abs_err": self.max_abs_err,
            "seconds": self.seconds,
            "metrics": self.metrics,
        }


ProgressFn = Callable[[CaseResult], None]


class _WorkerGone(Exception):
    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message


class Worker:
    """One worker subprocess and its line protocol."""

    def __init__(self, module_ref: str, *, cwd: Path, env: dict[str, str]) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self._buf = b""
        self._killed = False
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kbtool.probe.worker", module_ref],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,  # its own process group: a kill also reaches compilers it started
        )

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - STDERR_TAIL))
            return self._stderr.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def _gone(self) -> _WorkerGone:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        outcome, message = describe_exit(code, self._killed)
        tail = self._stderr_tail()
        if tail:
            message = f"{message}; stderr: {tail[-800:]}"
        return _WorkerGone(outcome, message)

    def _readline(self, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise self._gone()
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def wait_ready(self, timeout: float) -> None:
        try:
            line = self._readline(time.monotonic() + timeout)
        except TimeoutError:
            self.kill()
            raise _WorkerGone("TIMEOUT", f"worker did not start within {timeout:.0f} s") from None
        if json.loads(line).get("ready") is not True:
            self.kill()
            raise _WorkerGone("ERROR", f"worker sent {line[:200]!r} instead of its ready line")

    def ask(self, case: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(case) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._gone() from None
        try:
            line = self._readline(time.monotonic() + timeout)
        except TimeoutError:
            self.kill()
            raise _WorkerGone("TIMEOUT", f"no answer within {timeout:.0f} s; worker killed") from None
        try:
            answer: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            self.kill()
            raise _WorkerGone("ERROR", f"worker sent a line that is not JSON: {line[:200]!r}") from None
        return answer

    def kill(self) -> None:
        self._killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def close(self) -> None:
        """Let the worker finish on its own (kill it if it does not) and release its pipes."""
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
            self.proc.wait(timeout=20)
        except (subprocess.TimeoutExpired, OSError):
            self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self._stderr):
            if stream is not None and not stream.closed:
                with contextlib.suppress(OSError):
                    stream.close()


def worker_env(workers: int, root: Path) -> dict[str, str]:
    """Environment for workers: unbuffered, the repo on the path, compile jobs shared among workers."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(root) + (os.pathsep + path if path else "")
    total_jobs = int(env.get("MAX_JOBS") or os.cpu_count() or 1)
    env["MAX_JOBS"] = str(max(1, total_jobs // max(1, workers)))
    env.pop("KB_PROBE_FD", None)
    return env


def run_cases(
    probe: Probe,
    cases: list[dict[str, Any]],
    *,
    root: Path,
    progress: ProgressFn | None = None,
    workers: int | None = None,
    deadline: float | None = None,
) -> list[CaseResult]:
    """Run every case of a probe; never raises for what a case does. After `deadline` (time.monotonic())
    no case starts: the rest are recorded SKIPPED, and a running case gets at most 30 s past it."""
    n_workers = max(1, min(workers or probe.spec.workers, len(cases) or 1))
    env = worker_env(n_workers, root)
    results: list[CaseResult | None] = [None] * len(cases)
    next_index = iter(range(len(cases)))
    lock = threading.Lock()
    live: set[Worker] = set()  # ended when the run is stopped (SIGINT, SIGTERM): they run in their own sessions
    stopping = threading.Event()

    def take() -> int | None:
        with lock:
            return None if stopping.is_set() else next(next_index, None)

    def started(worker: Worker) -> Worker:
        with lock:
            live.add(worker)
        if stopping.is_set():
            worker.kill()
        return worker

    def record(result: CaseResult) -> None:
        with lock:
            results[result.index] = result
            if progress:
                progress(result)

    def slot() -> None:
        worker: Worker | None = None
        while (i := take()) is not None:
            case = cases[i]
            timeout = float(case.get("timeout_s") or probe.spec.timeout_s)
            start = time.monotonic()
            if deadline is not None:
                if start >= deadline:
                    record(CaseResult(i, case, "SKIPPED", "not started: the run's time budget was spent"))
                    continue
                timeout = min(timeout, deadline - start + 30)
            try:
                if worker is None:
                    worker = started(Worker(probe.module_ref, cwd=root, env=env))
                    worker.wait_ready(timeout)
                answer = worker.ask(case, timeout)
            except _WorkerGone as gone:
                if worker is not None:
                    worker.kill()
                    worker.close()
                worker = None
                record(
                    CaseResult(i, case, gone.outcome, gone.message, seconds=round(time.monotonic() - start, 3))
                )
                continue
            res = CaseResult(
                index=i,
                params=case,
                outcome=str(answer.get("outcome", "ERROR")),
                message=answer.get("message"),
                kernels=list(answer.get("kernels") or []),
                max_abs_err=answer.get("max_abs_err"),
                seconds=answer.get("seconds"),
                metrics=dict(answer.get("metrics") or {}),
            )
            record(res)
            if res.outcome in ("ERROR", "OOM"):
                # The CUDA context may be broken after an error: the next case gets a fresh worker.
                worker.close()
                worker = None
        if worker is not None:
            worker.close()

    threads = [threading.Thread(target=slot, daemon=True) for _ in range(n_workers)]
    with terminate_raises():
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        except BaseException:  # Ctrl-C or SIGTERM: no case starts, and every worker (with what it started) ends
            stopping.set()
            with lock:
                running = list(live)
            for w in running:
                w.kill()
            raise
    return [r for r in results if r is not None]
