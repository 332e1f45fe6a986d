"""`kb probe campaign` (kbtool/probe/campaign.py): a small plan on recorded grid shards, in one process and on a
local Ray cluster, the same files either way; a worker killed mid-task loses only that attempt (Ray retries it)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from kbtool.errors import UsageError
from kbtool.probe import campaign
from tests.util import ROOT

PLAN = ROOT / "tests" / "data" / "campaign" / "two-releases.yaml"


def test_plan_expands_releases_times_shards(tmp_path: Path) -> None:
    name, tasks = campaign.load_plan(PLAN)
    assert name == "two-recorded-releases"
    assert [t.id for t in tasks] == ["replay-0.19.1-cc8.0", "replay-0.19.1-cc9.0", "replay-0.24.0-cc8.0",
                                     "replay-0.24.0-cc9.0"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks:\n  - {kind: replay, releases: [0.24.0]}\n")
    with pytest.raises(UsageError, match=r"\$.tasks\[0\].shards: a replay task needs a shard"):
        campaign.load_plan(bad)


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("inproc")
    report = campaign.run(PLAN, out=out, root=ROOT, ray_address="none")
    assert report.engine == "in-process" and [r.status for r in report.results] == ["ok"] * 4
    return out


def test_replay_merges_shards_into_release_outcomes(in_process: Path) -> None:
    doc = json.loads((in_process / "replay-0.24.0.json").read_text())
    assert doc["shards"] == ["cc8.0", "cc9.0"]
    cid = "vllm-flashinfer-head-size-64-128-256-512"
    fi = doc["outcomes"][cid]  # [64, 128, 256, 512]: what 0.24.0's FLASHINFER lists
    assert fi["outcome"] == "holds" and fi["against"] == 0 and fi["agree"] > 0
    old = json.loads((in_process / "replay-0.19.1.json").read_text())["outcomes"][cid]
    assert old["outcome"] == "fails"  # 0.19.1 refuses head size 512


def test_local_ray_cluster_gives_the_same_files_and_survives_a_killed_worker(in_process: Path,
                                                                            tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    ray.init(include_dashboard=False, log_to_driver=False, num_cpus=2,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        box: dict[str, campaign.CampaignReport] = {}
        runner = threading.Thread(target=lambda: box.setdefault("r", campaign.run(PLAN, out=tmp_path, root=ROOT)))
        runner.start()
        killed = None
        deadline = time.monotonic() + 120
        while killed is None and runner.is_alive() and time.monotonic() < deadline:
            for pid in campaign.running_task_pids()[:1]:
                os.kill(pid, signal.SIGKILL)
                killed = pid
            time.sleep(0.2)
        runner.join(timeout=600)
        report = box["r"]
    finally:
        ray.shutdown()
    assert killed is not None, "no Ray worker was seen running a task"
    assert [r.status for r in sorted(report.results, key=lambda r: r.task)] == ["ok"] * 4
    assert killed not in {r.pid for r in report.results}  # the killed attempt was run again by another worker
    for release in ("0.19.1", "0.24.0"):
        assert json.loads((tmp_path / f"replay-{release}.json").read_text()) == \
            json.loads((in_process / f"replay-{release}.json").read_text())
