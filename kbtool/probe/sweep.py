"""`kb probe sweep`: every release of an engine library, each in its own environment, through `kb probe run`.

For each release from the registry (PyPI's JSON API; yanked and pre-releases left out) that has no evidence yet
for a probe the library's sweep runs, a fresh virtual environment gets that release (with the torch it pins), each
missing probe runs as `kb probe run --probe P` with the engine interpreter named (KB_VLLM_PYTHON), so the
evidence and the raw grids are written by the tool itself, and the environment is deleted before the next
release is installed (a vLLM environment is ~10 GB). A release whose install or probe fails is recorded as that
release's failure in the sweep's state file and the sweep goes on. Existing evidence is skipped unless `force`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbtool.errors import ProbeError, UsageError
from kbtool.solve.conditions import compare_versions

REGISTRY = "https://pypi.org/pypi/{dist}/json"
# library -> (distribution, the probes its sweep runs, the variable naming the engine interpreter)
LIBRARIES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "vllm": ("vllm", ("vllm-selector", "vllm-rocm-selector", "vllm-options"), "KB_VLLM_PYTHON"),
}
PRE = re.compile(r"(a|b|rc|alpha|beta|dev|pre|preview)\d*", re.IGNORECASE)
STATE = "sweep-state.json"


@dataclass
class Task:
    release: str
    probes: list[str]


@dataclass
class ReleaseResult:
    release: str
    status: str  # ok | failed | skipped
    probes: dict[str, str] = field(default_factory=dict)  # probe -> ok | failed: why | skipped (evidence exists)
    evidence: list[str] = field(default_factory=list)
    install_s: float = 0.0
    probe_s: float = 0.0
    why: str | None = None


def library(lib: str) -> tuple[str, tuple[str, ...], str]:
    if lib not in LIBRARIES:
        raise UsageError(f"no sweep for library '{lib}'", fix=f"one of: {', '.join(LIBRARIES)}")
    return LIBRARIES[lib]


def is_pre(version: str) -> bool:
    return bool(PRE.search(version.split("+")[0].replace(".post", "+")))


def parse_registry(doc: dict[str, Any]) -> list[str]:
    """Final releases in a PyPI JSON document, oldest first: not pre-releases, not yanked, with files."""
    out = []
    for version, files in (doc.get("releases") or {}).items():
        if is_pre(version) or not files or all(f.get("yanked") for f in files):
            continue
        out.append(version)
    return sort_versions(out)


def sort_versions(versions: list[str]) -> list[str]:
    import functools

    return sorted(set(versions), key=functools.cmp_to_key(compare_versions))


def registry_releases(lib: str, fetch: Callable[[str], bytes] | None = None) -> list[str]:
    dist = library(lib)[0]
    url = REGISTRY.format(dist=dist)
    try:
        raw = fetch(url) if fetch else urllib.request.urlopen(url, timeout=60).read()
        return parse_registry(json.loads(raw))
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot read {dist}'s releases from {url}: {exc}",
                         fix="check the network, or name the releases with --releases") from exc


def choose(releases: list[str], lo: str | None, hi: str | None, only: list[str] | None,
           newer_than: str | None = None) -> list[str]:
    """The releases a sweep covers: `only` (each must be on the registry), or those in [lo, hi], or those
    newer than `newer_than` (`--new`)."""
    if only:
        missing = [r for r in only if r not in releases]
        if missing:
            raise UsageError(f"not a final release on the registry: {', '.join(missing)}",
                             fix=f"registry releases: {', '.join(releases[-8:])} ...")
        return list(dict.fromkeys(only))  # in the order given: a sweep short of time runs the first ones
    out = [r for r in releases
           if (lo is None or compare_versions(r, lo) >= 0) and (hi is None or compare_versions(r, hi) <= 0)
           and (newer_than is None or compare_versions(r, newer_than) > 0)]
    return out


def recorded(records: Path, lib: str) -> dict[tuple[str, str], list[str]]:
    """(release, probe) -> evidence ids already under records/evidence for the library's sweep probes."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    probes = set(library(lib)[1])
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted((records / "evidence").glob("*.yaml")):
        if "no-gpu" not in path.name:
            continue  # engine probes run with no GPU; their files say so in the name (kbtool/probe/evidence.py)
        try:
            rec = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
        except (OSError, yaml.YAMLError):
            continue
        if not isinstance(rec, dict):
            continue
        pid = str((rec.get("probe") or {}).get("id"))
        version = ((rec.get("environment") or {}).get("libraries") or {}).get(lib)
        if pid in probes and version:
            out.setdefault((str(version), pid), []).append(str(rec.get("id")))
    return out


def newest_recorded(records: Path, lib: str) -> str | None:
    versions = [v for v, _ in recorded(records, lib)]
    return sort_versions(versions)[-1] if versions else None


def plan(records: Path, lib: str, releases: list[str], *, force: bool = False,
         probes: list[str] | None = None) -> tuple[list[Task], list[str]]:
    """Tasks (release, the probes it lacks) and the releases skipped because their evidence exists."""
    have = recorded(records, lib)
    wanted = probes or list(library(lib)[1])
    tasks, skipped = [], []
    for r in releases:
        missing = [p for p in wanted if force or (r, p) not in have]
        if missing:
            tasks.append(Task(r, missing))
        else:
            skipped.append(r)
    return tasks, skipped


def _uv() -> str | None:
    found = shutil.which("uv")
    if found:
        return found
    beside = Path(sys.executable).with_name("uv")
    return str(beside) if beside.exists() else None


def install(lib: str, release: str, venv: Path, python: str, log: Path, cache: Path | None = None) -> None:
    """A fresh environment at `venv` holding `dist==release` and what it pins (uv when present, else pip). uv's
    cache is $UV_CACHE_DIR, else `cache`, else `venv`'s folder/uv-cache."""
    dist = library(lib)[0]
    if venv.exists():
        shutil.rmtree(venv)
    uv = _uv()
    env = dict(os.environ)
    if uv:
        env.setdefault("UV_CACHE_DIR", str(cache or venv.parent / "uv-cache"))
        steps = [[uv, "venv", "-q", "-p", python, str(venv)],
                 [uv, "pip", "install", "-q", "-p", str(venv / "bin" / "python"), f"{dist}=={release}"]]
    else:
        steps = [[python, "-m", "venv", str(venv)],
                 [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{dist}=={release}"]]
    with log.open("a", encoding="utf-8") as fh:
        for cmd in steps:
            fh.write(f"$ {' '.join(cmd)}\n")
            fh.flush()
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=3600, check=False)
            if proc.returncode != 0:
                raise ProbeError(f"installing {dist}=={release} failed (exit {proc.returncode}); see {log}")


def run_probe(probe: str, interpreter: Path, env_var: str, root: Path, records: Path, log: Path,
              out: Path | None = None) -> tuple[bool, str, list[str]]:
    """`kb probe run --probe P` under the release's interpreter: (ok, why, evidence paths written)."""
    cmd = [sys.executable, "-m", "kbtool", "probe", "run", "--probe", probe, "--json", "--kb", str(records)]
    if out is not None:
        cmd += ["--out", str(out)]
    env = dict(os.environ, **{env_var: str(interpreter)})
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=7200, check=False)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {env_var}={interpreter} {' '.join(cmd)}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}\n")
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return False, tail[0][:300], []
    written = [str(p) for p in report.get("written") or [] if str(p).endswith(".yaml")]
    runs = [r for r in report.get("runs") or [] if r.get("probe") == probe]
    if not runs or runs[0].get("status") != "ran":
        why = runs[0].get("why") if runs else "the probe did not run"
        return False, str(why), written
    outcomes = runs[0].get("outcomes") or {}
    bad = {k: v for k, v in outcomes.items() if k not in ("OK", "UNSUPPORTED")}  # a refusal is an observation
    return not bad, (", ".join(f"{v} {k}" for k, v in bad.items()) if bad else "ok"), written


def sweep(
    records: Path,
    lib: str,
    tasks: list[Task],
    *,
    workdir: Path,
    python: str | None = None,
    root: Path | None = None,
    on_step: Callable[[str, str], None] | None = None,
    keep: bool = False,
) -> list[ReleaseResult]:
    """Install, probe and delete, release by release; one environment at a time. The state file in `workdir`
    records each release's result as it ends (a sweep stopped half-way says where it was)."""
    from kbtool.probe.commands import REPO_ROOT

    dist, _, env_var = library(lib)
    root = root or REPO_ROOT
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "log"
    state_path = workdir / STATE
    results: list[ReleaseResult] = []
    for task in tasks:
        res = ReleaseResult(task.release, "ok")
        venv = workdir / f"{dist}-{task.release}"
        step = on_step or (lambda _r, _s: None)
        try:
            step(task.release, "install")
            t0 = time.monotonic()
            install(lib, task.release, venv, python or sys.executable, log)
            res.install_s = round(time.monotonic() - t0, 1)
            for probe in task.probes:
                step(task.release, probe)
                t1 = time.monotonic()
                ok, why, written = run_probe(probe, venv / "bin" / "python", env_var, root, records, log)
                res.probe_s += round(time.monotonic() - t1, 1)
                res.evidence += written
                res.probes[probe] = "ok" if ok else f"failed: {why}"
            if any(v != "ok" for v in res.probes.values()):
                res.status = "failed"
        except (ProbeError, OSError, subprocess.TimeoutExpired) as exc:
            res.status, res.why = "failed", str(exc)
        finally:
            if not keep and venv.exists():
                shutil.rmtree(venv, ignore_errors=True)
            _prune_cache(venv.parent / "uv-cache", dist)
        results.append(res)
        _save_state(state_path, res)
        step(task.release, res.status)
    return results


def _prune_cache(cache: Path, dist: str) -> None:
    """Drop the release's own wheel from uv's cache (torch and its CUDA libraries stay: the next release
    most likely pins the same)."""
    uv = _uv()
    if uv and cache.is_dir():
        subprocess.run([uv, "cache", "clean", dist], env=dict(os.environ, UV_CACHE_DIR=str(cache)),
                       capture_output=True, timeout=600, check=False)


def _save_state(path: Path, res: ReleaseResult) -> None:
    try:
        state = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except ValueError:
        state = {}
    state[res.release] = asdict(res)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
