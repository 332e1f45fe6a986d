"""probes/_group.py: a boot and everything it started end together, at the deadline or at its exit."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from probes._group import run_in_group

# starts a sleeper that outlives its parent unless the group is killed, then (optionally) hangs itself
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(child.pid))
print("started", flush=True)
if sys.argv[2] == "hang":
    time.sleep(600)
"""


def _gone(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    for _ in range(40):
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_the_children_of_a_finished_boot_are_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    code, out, killed = run_in_group([sys.executable, "-c", PARENT, str(pid_file), "exit"], 30)
    assert (code, killed) == (0, False) and out.strip() == "started"
    assert _gone(int(pid_file.read_text()))


def test_a_hung_boot_ends_at_its_deadline_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    t0 = time.monotonic()
    code, out, killed = run_in_group([sys.executable, "-c", PARENT, str(pid_file), "hang"], 2)
    assert killed and code == -9 and "started" in out
    assert time.monotonic() - t0 < 10
    assert _gone(int(pid_file.read_text()))
