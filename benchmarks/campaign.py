"""The campaign runner's wall time in one process and on a local Ray cluster, and what a killed worker costs.

    python benchmarks/campaign.py [PLAN] [--cpus N] [--kill-after S]

Runs PLAN (default: tests/data/campaign/recorded-releases.yaml, every recorded release's selector grid, one
compute capability a task) three times into temporary folders: in this process, on a local Ray cluster of N CPUs
(default: this machine's), and on that cluster again with the first Ray worker seen running a task SIGKILLed
(`--kill-after S`: S seconds into its task).
Prints each wall time, the ratio to the in-process run, whether the three runs wrote the same files (replay
outcomes; evidence outcomes, data and raw-grid digests), and each task's time. Needs the `campaign` extra (ray);
nothing is written under records/, and raw grids that release tasks wrote into tests/data/vllm are removed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kbtool.probe import campaign  # noqa: E402


def digest(folder: Path) -> dict[str, str]:
    """What must not depend on where a task ran: each replay file's bytes, and of each evidence record a release
    task wrote, its outcomes, its data and the sha256 of the raw grids it names (not its times)."""
    from kbtool.store.reader import read_document

    out = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in sorted(folder.glob("replay-*.json"))}
    for p in sorted(folder.glob("*/*.yaml")):
        doc, _ = read_document(p)
        rec = doc.data if doc is not None and isinstance(doc.data, dict) else {}
        cases = [c for c in rec.get("cases") or [] if isinstance(c, dict)]
        keep = {"data": rec.get("data"), "outcomes": [c.get("outcome") for c in cases],
                "raw": [(c.get("metrics") or {}).get("sha256") for c in cases]}
        probe = (rec.get("probe") or {}).get("id")
        out[f"{p.parent.name}/{probe}"] = hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:12]
    return out


def raw_grids() -> set[Path]:
    return {p for p in (ROOT / "tests" / "data" / "vllm").rglob("*") if p.is_file()}


def kill_one_worker(stop: threading.Event, killed: list[int], after: float) -> None:
    """SIGKILL the first Ray worker seen running a task, `after` seconds after it was first seen."""
    seen: dict[int, float] = {}
    while not stop.is_set() and not killed:
        for pid in campaign.running_task_pids()[:1]:
            seen.setdefault(pid, time.monotonic())
            if time.monotonic() - seen[pid] >= after:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        time.sleep(0.2)


def on_ray(plan: Path, out: Path, cpus: int, kill: bool, after: float = 0.0) -> tuple[campaign.CampaignReport,
                                                                                     list[int]]:
    import ray

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=kill_one_worker, args=(stop, killed, after)) if kill else None
    try:
        if killer:
            killer.start()
        report = campaign.run(plan, out=out, root=ROOT)
    finally:
        stop.set()
        if killer:
            killer.join()
        ray.shutdown()
    return report, killed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plan", nargs="?", type=Path, default=ROOT / "tests/data/campaign/recorded-releases.yaml")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--kill-after", type=float, default=0.0,
                    help="seconds a worker runs its task before it is killed (default: as soon as it is seen)")
    args = ap.parse_args()
    before = raw_grids()  # a release task writes its raw grid into the checkout; the new ones go at the end
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        one = campaign.run(args.plan, out=base / "one", root=ROOT, ray_address="none")
        ray_report, _ = on_ray(args.plan, base / "ray", args.cpus, kill=False)
        kill_report, killed = on_ray(args.plan, base / "kill", args.cpus, kill=True, after=args.kill_after)
        same = digest(base / "one") == digest(base / "ray") == digest(base / "kill")
        print(f"plan {args.plan.name}: {len(one.results)} tasks; {os.cpu_count()} cores, Ray cluster of "
              f"{args.cpus} CPUs")
        runs = (("one process", one), ("local Ray", ray_report), ("local Ray, a worker killed", kill_report))
        for label, rep in runs:
            ok = sum(r.status == "ok" for r in rep.results)
            print(f"  {label:28} {rep.seconds:7.1f} s  x{rep.seconds / one.seconds:5.2f}  {ok}/{len(rep.results)} ok")
        rerun = {r.task for r in kill_report.results if killed and r.pid != killed[0]}
        print(f"  killed worker pid {killed[0] if killed else 'none'} ({args.kill_after:g} s into its task); "
              "every task completed by a live worker: "
              f"{len(rerun) == len(kill_report.results)}; same replay files and evidence in all three runs: {same}")
        for label, rep in runs:
            for r in rep.results:
                print(f"    {label:28} {r.task:40} {r.status:6} {r.seconds:7.1f} s  pid {r.pid}")
    for p in raw_grids() - before:
        p.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
