"""Stopping a probe run or a sweep (SIGTERM, SIGINT) ends the probe workers it started (issue 46): a worker runs in
its own session, so nothing else would, and it would go on writing evidence against a deleted environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbtool.probe.commands import REPO_ROOT

FIXTURE = str(Path(__file__).parent / "fixtures" / "sleepy_probe.py")
# A shell's background job (`nohup pytest &`, a CI step run that way) starts with SIGINT ignored, and Python keeps an
# inherited SIG_IGN: each script takes Python's own SIGINT handler back so the test is the same wherever it runs
TAKE_SIGINT = "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
RUN_CASES = TAKE_SIGINT + (
    "import sys\n"
    "from pathlib import Path\n"
    "from kbtool.probe.runner import run_cases\n"
    "from kbtool.probe.spec import load_probe\n"
    "probe = load_probe(sys.argv[1])\n"
    "run_cases(probe, probe.cases(), root=Path(sys.argv[2]))\n"
)
# A sweep (its install left out) whose probe step starts the run above in its own process group through
# sweep._run_group, as sweep.run_probe starts `kb probe run`
SWEEP = TAKE_SIGINT + (
    "import sys, tempfile\n"
    "from pathlib import Path\n"
    "from kbtool.probe import sweep\n"
    "def probe(*_a, **_k):\n"
    "    sweep._run_group([sys.executable, '-c', sys.argv[3], sys.argv[1], sys.argv[2]], stdout=None, env=None,\n"
    "                     timeout=600)\n"
    "    return True, 'ok', []\n"
    "sweep.install = lambda *a, **k: None\n"
    "sweep.run_probe = probe\n"
    "sweep.sweep(Path(sys.argv[2]) / 'records', 'vllm', [sweep.Task('0.34.0', ['vllm-selector'])],\n"
    "            workdir=Path(tempfile.mkdtemp()))\n"
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (ended, not yet reaped by its parent) counts as ended
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _worker_pid(pidfile: Path, parent: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if pidfile.exists() and pidfile.read_text():
            return int(pidfile.read_text())
        assert parent.poll() is None, "the run ended before its worker started"
        time.sleep(0.1)
    raise AssertionError("the worker never wrote its pid")


@pytest.mark.parametrize(("script", "sig"), [(RUN_CASES, signal.SIGTERM), (RUN_CASES, signal.SIGINT),
                                             (SWEEP, signal.SIGTERM), (SWEEP, signal.SIGINT)],
                         ids=["run-term", "run-int", "sweep-term", "sweep-int"])
def test_stopping_ends_the_workers(tmp_path: Path, script: str, sig: int) -> None:
    pidfile = tmp_path / "pid"
    env = dict(os.environ, KB_TEST_PIDFILE=str(pidfile), PYTHONPATH=str(REPO_ROOT))
    parent = subprocess.Popen([sys.executable, "-c", script, FIXTURE, str(REPO_ROOT), RUN_CASES], env=env,
                              stderr=subprocess.DEVNULL)
    try:
        worker = _worker_pid(pidfile, parent)
        assert _alive(worker)
        parent.send_signal(sig)
        parent.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), f"worker {worker} outlived the stopped run"
    finally:
        if parent.poll() is None:
            parent.kill()
        if pidfile.exists() and pidfile.read_text() and _alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
