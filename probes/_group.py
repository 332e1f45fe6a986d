"""Process groups of the boot probes: a boot runs in its own session, and whatever the engine started in it (the
engine core, schedulers, compilers) is killed with it, so the next case finds the GPU free."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time


def run_in_group(argv: list[str], timeout_s: float, **popen: object) -> tuple[int | None, str, bool]:
    """Run `argv` in a new session: (exit code, stdout and stderr, whether the deadline killed it). The whole
    group is SIGKILLed at the deadline, and after a normal exit too (children the process left behind). The
    output goes to a file, not a pipe: a child that keeps the pipe open would hold the wait past the exit."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                **popen)  # type: ignore[call-overload]
        killed = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            killed = True
        wait_group_gone(proc.pid)
        log.seek(0)
        return proc.returncode, log.read(), killed


def wait_group_gone(pgid: int, limit_s: float = 20) -> None:
    """SIGKILL the group until none of it is left (or `limit_s` passes)."""
    t0 = time.time()
    while time.time() - t0 < limit_s:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.5)
