"""`kb probe campaign PLAN`: many independent probe tasks, on a Ray cluster or in this process (issue 28).

A plan (YAML) lists tasks; entries with lists expand to one task per combination:

    name: vllm-two-releases
    tasks:
      - {kind: replay, releases: [0.19.1, 0.24.0], shards: [cc8.0, cc9.0]}     # judge recorded grid shards
      - {kind: release, releases: [0.28.0], probes: [vllm-selector, vllm-options]}  # install, probe, delete
      - {kind: probe, probe: flashinfer-head-dim, num_gpus: 1, accelerator_type: H200}

- `probe`: `kb probe run --probe P --out TMP` where the task lands (a GPU probe asks Ray for `num_gpus` and
  the `accelerator_type:T` resource, so it runs on a node with that GPU);
- `release`: the sweep's unit (kbtool/probe/sweep.py): a fresh environment with the release, its probes run
  with `--out TMP`, the environment deleted (uv's cache, `UV_CACHE`, is kept on the node);
- `replay`: the vllm-selector judge over one shard (one compute capability) of a release's recorded grid under
  tests/data/vllm: every engine claim's outcome on that shard, no vLLM needed.

Every task returns its files (relative path -> bytes) to the driver, which writes them only once the task has
completed: evidence and probe-run.json under OUT/<task>/ (merge with `kb probe apply OUT/*`), raw grids at their
own path under the checkout, replay shards merged per release into OUT/replay-<release>.json. On Ray a task
whose worker dies is retried (`max_retries`); a task that still fails is recorded as failed and the rest go on.
Without Ray (not installed, or `--ray-address none`) the same tasks run one after another here.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbtool.errors import ProbeError, WriteError
from kbtool.probe.plan import KINDS, Task, check_name, load_plan, under

__all__ = ["KINDS", "CampaignReport", "Task", "TaskResult", "load_plan", "run"]

# uv's cache for release tasks: kept between tasks and campaigns (torch and its CUDA wheels, ~3 GB, are what most
# releases share; a task's temporary folder would download them again every time); $UV_CACHE_DIR wins
UV_CACHE = Path.home() / ".cache" / "kb" / "uv"
RETRIES = 3


@dataclass
class TaskResult:
    task: str
    status: str  # ok | failed
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)
    pid: int | None = None
    error: str | None = None


@dataclass
class CampaignReport:
    name: str
    engine: str  # ray (address) | in-process
    results: list[TaskResult] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    seconds: float = 0.0


# ---- running one task (in a Ray worker or here) ---------------------------------------------------------------

def _collect(folder: Path, prefix: str) -> dict[str, bytes]:
    return {f"{prefix}/{p.relative_to(folder)}": p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _kb_run(probe: str, out: Path, root: Path, env: dict[str, str]) -> None:
    cmd = [sys.executable, "-m", "kbtool", "probe", "run", "--probe", probe, "--out", str(out), "--json"]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=7200, check=False)
    if proc.returncode not in (0, 1) or not (out / "probe-run.json").exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise ProbeError(f"kb probe run --probe {probe} failed: {tail[0][:300]}")


def _raw_written(evidence_dir: Path, root: Path) -> dict[str, bytes]:
    """The raw grids the run's evidence names (metrics.raw, relative to the checkout)."""
    import yaml

    out: dict[str, bytes] = {}
    for f in evidence_dir.glob("*.yaml"):
        rec = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
        for case in rec.get("cases") or []:
            raw = (case.get("metrics") or {}).get("raw")
            if raw and not Path(raw).is_absolute() and (root / raw).is_file():
                out[str(raw)] = (root / raw).read_bytes()
    return out


def replay(task: Task, root: Path) -> dict[str, bytes]:
    from kbtool.probe.judges import vllm_selector as vs

    path = under(root, f"tests/data/vllm/{check_name('release', task.release, 'release')}/"
                       f"{check_name('shard', task.shard, 'shard')}.json.gz")
    if not path.is_file():
        raise ProbeError(f"no recorded grid {path.relative_to(root)}", fix="sweep the release first")
    doc = vs.load(path)
    outcomes = vs.release_outcomes(vs.rows(doc), str(doc["vllm"]))
    body = {"release": task.release, "shard": task.shard, "grid": str(path.relative_to(root)),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "outcomes": outcomes}
    return {f"replay/{task.release}/{task.shard}.json": json.dumps(body, sort_keys=True).encode()}


def execute(task: Task, root: Path) -> dict[str, Any]:
    """Run one task; return {"files": {relative path: bytes}, "pid", "seconds"}. Raises on failure."""
    t0 = time.monotonic()
    files: dict[str, bytes] = {}
    if task.kind == "replay":
        files = replay(task, root)
    else:
        with tempfile.TemporaryDirectory(prefix=f"kb-campaign-{task.id}-") as tmp:
            out = Path(tmp) / "out"
            env = dict(os.environ)
            if task.kind == "release":
                from kbtool.probe import sweep

                dist, _, env_var = sweep.library("vllm")
                venv = Path(tmp) / f"{dist}-{task.release}"
                sweep.install("vllm", str(task.release), venv, sys.executable, Path(tmp) / "install.log",
                              cache=UV_CACHE)
                env[env_var] = str(venv / "bin" / "python")
            _kb_run(str(task.probe), out, root, env)
            files = _collect(out, "out")
            files.update(_raw_written(out, root))
    return {"files": files, "pid": os.getpid(), "seconds": round(time.monotonic() - t0, 2)}


# ---- the driver ------------------------------------------------------------------------------------------------

def _write(out: Path, root: Path, task: Task, files: dict[str, bytes]) -> list[str]:
    """Write what a task returned: its own files under OUT/<task>/, replay shards under OUT/replay/, raw grids
    under the checkout's tests/data; every path checked to stay there (plan.under) before and after its folders
    are made."""
    written = []
    for rel, data in sorted(files.items()):
        if rel.startswith("out/"):
            base, sub = out, f"{task.id}/{rel.removeprefix('out/')}"
        elif rel.startswith("replay/"):
            base, sub = out, rel
        else:
            base, sub = root / "tests" / "data", rel.removeprefix("tests/data/")  # a raw grid, where evidence names it
            if not rel.startswith("tests/data/"):
                raise WriteError(f"{task.id}: returned {rel[:200]!r}, not a raw grid under tests/data; not written",
                                 fix="a task returns files under out/, replay/ or tests/data/")
        dest = under(base, sub)
        _mkdir(dest.parent)
        dest = under(base, sub)  # a folder made above cannot have led out
        if base is not out and dest.is_file() and dest.read_bytes() != data:
            _keep(base, dest)  # a grid another run wrote: its evidence reads the kept copy (kbtool.probe.recorded)
        tmp = dest.with_name(dest.name + ".part")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, dest)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise _cannot(dest, exc) from None
        written.append(str(dest))
    return written


def _keep(base: Path, dest: Path) -> None:
    """Keep the grid at `dest` under its digest before a task's grid replaces it; the copy checked to stay in
    `base` as every written path is."""
    from kbtool.probe.recorded import digest, keep_superseded, kept_copy

    kept = kept_copy(dest, digest(dest))
    under(base, kept.relative_to(base).as_posix())
    _mkdir(kept.parent)
    under(base, kept.relative_to(base).as_posix())  # a folder made above cannot have led out
    try:
        keep_superseded(dest)
    except OSError as exc:
        raise _cannot(kept, exc) from None


def _cannot(path: Path, exc: OSError) -> WriteError:
    why = {errno.ENOSPC: "the file system is full", errno.EROFS: "the file system is read-only",
           errno.EACCES: "permission denied", errno.ENOTDIR: "a parent is a file, not a folder",
           errno.EEXIST: "it is a file, not a folder"}.get(exc.errno or 0, exc.strerror or str(exc))
    return WriteError(f"cannot write {path}: {why}", fix="give --out a writable folder with free space")


def _mkdir(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot(folder, exc) from None
    if not folder.is_dir():
        raise WriteError(f"cannot write {folder}: it is a file, not a folder",
                         fix="give --out a writable folder with free space")


def merge_replays(out: Path) -> list[str]:
    """Per release: the shards' outcomes summed (points against and as the claim says add up across shards)."""
    written = []
    for folder in sorted((out / "replay").glob("*")) if (out / "replay").is_dir() else []:
        merged: dict[str, dict[str, Any]] = {}
        shards = []
        for f in sorted(folder.glob("*.json")):
            doc = json.loads(f.read_text(encoding="utf-8"))
            shards.append(doc["shard"])
            for claim, e in doc["outcomes"].items():
                m = merged.setdefault(claim, {"agree": 0, "against": 0})
                m["agree"] += e["agree"]
                m["against"] += e["against"]
        for m in merged.values():
            m["outcome"] = "none" if m["agree"] + m["against"] == 0 else "fails" if m["against"] else "holds"
        dest = under(out, f"replay-{check_name('release', folder.name, str(folder))}.json")
        _put(dest, json.dumps({"release": folder.name, "shards": shards, "outcomes": merged}, indent=1,
                              sort_keys=True) + "\n")
        written.append(str(dest))
    return written


def store_outcomes(out: Path, root: Path) -> list[str]:
    """Replay shards into tests/data/vllm/<release>/outcomes.json beside the grids they were judged from (each
    shard with the sha256 of its grid file), for the release timelines of releases whose evidence summary
    predates per-release outcomes (kbtool/solve/engines/vllm/timeline.py reads them only where the hashes match)."""
    written = []
    for folder in sorted((out / "replay").glob("*")) if (out / "replay").is_dir() else []:
        dest = under(root, f"tests/data/vllm/{check_name('release', folder.name, str(folder))}/outcomes.json")
        doc: dict[str, Any] = json.loads(dest.read_text(encoding="utf-8")) if dest.exists() else {
            "release": folder.name, "shards": {}}
        for f in sorted(folder.glob("*.json")):
            shard = json.loads(f.read_text(encoding="utf-8"))
            doc["shards"][shard["shard"]] = {"sha256": shard["sha256"], "outcomes": shard["outcomes"]}
        doc["outcomes_version"] = _outcomes_version()
        _put(dest, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        written.append(str(dest))
    return written


def _put(dest: Path, text: str) -> None:
    try:
        dest.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _cannot(dest, exc) from None


def _outcomes_version() -> int:
    from kbtool.probe.judges import vllm_selector

    return int(vllm_selector.OUTCOMES_VERSION)


def _ray_run(tasks: list[Task], root: Path, address: str | None,
             on_done: Callable[[Task, dict[str, Any] | None, str | None], None]) -> str:
    import ray

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(root)}})
    remote = ray.remote(max_retries=RETRIES, retry_exceptions=False)(execute)
    pending = {}
    for t in tasks:
        opts: dict[str, Any] = {"num_cpus": 1, "num_gpus": t.num_gpus}
        if t.accelerator_type:
            opts["accelerator_type"] = t.accelerator_type
        pending[remote.options(**opts).remote(t, root)] = t
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            task = pending.pop(ref)
            try:
                on_done(task, ray.get(ref), None)
            except Exception as exc:  # the task's own failure, or its worker died more than RETRIES times
                on_done(task, None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
    return f"ray ({ray.get_runtime_context().gcs_address})"


def run(plan: Path, *, out: Path, root: Path, ray_address: str | None = "local",
        on_done: Callable[[TaskResult], None] | None = None, store: bool = False) -> CampaignReport:
    """Run the plan's tasks on Ray (`ray_address`: "local" starts a cluster here, "auto" or host:port joins one,
    "none" runs here without Ray) and write what each returns once it has completed."""
    name, tasks = load_plan(plan)
    report = CampaignReport(name, "in-process")
    t0 = time.monotonic()
    _mkdir(out)
    probe = out / ".kb-write-test"
    try:  # a read-only or full --out is said before any task runs, not after the first one
        probe.write_bytes(b"x" * 4096)
        probe.unlink()
    except OSError as exc:
        probe.unlink(missing_ok=True)
        raise _cannot(out, exc) from None

    def done(task: Task, got: dict[str, Any] | None, error: str | None) -> None:
        if got is None:
            res = TaskResult(task.id, "failed", error=error)
        else:
            res = TaskResult(task.id, "ok", got["seconds"], _write(out, root, task, got["files"]), got["pid"])
        report.results.append(res)
        if on_done:
            on_done(res)

    use_ray = ray_address not in (None, "none")
    if use_ray:
        try:
            import ray  # noqa: F401
        except ImportError:
            use_ray = False
    if use_ray:
        report.engine = _ray_run(tasks, root, None if ray_address == "local" else ray_address, done)
    else:
        for t in tasks:
            try:
                got = execute(t, root)
            except Exception as exc:  # one task's failure is that task's result
                done(t, None, f"{type(exc).__name__}: {exc}")
                continue
            done(t, got, None)
    report.merged = merge_replays(out) + (store_outcomes(out, root) if store else [])
    report.seconds = round(time.monotonic() - t0, 1)
    _put(out / "campaign.json", json.dumps(asdict(report), indent=1) + "\n")
    return report


def running_task_pids() -> list[int]:
    """Pids of this machine's Ray workers running a campaign task (what a worker-failure test or benchmark kills)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and cmd.startswith(b"ray::execute"):
            pids.append(int(proc.name))
    return pids


def clean(out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
