"""`kb probe sweep`: every release of an engine library, each in its own environment, through `kb probe run`.

For each release from the registry (PyPI's JSON API; yanked and pre-releases left out) that has no evidence yet
for a probe the library's sweep runs, a fresh virtual environment gets that release (with the torch it pins), each
missing probe runs as `kb probe run --probe P` with the engine interpreter named (KB_VLLM_PYTHON), so the
evidence and the raw grids are written by the tool itself, and the environment is deleted before the next
release is installed (a vLLM environment is ~10 GB). A release whose install or probe fails is recorded as that
release's failure in the sweep's state file and the sweep goes on. Existing evidence is skipped unless `force`;
evidence of a run that did not complete (a case ERROR, TIMEOUT or SKIPPED) is not a record of the release, so the
next sweep (`--new` included) offers that release again.

After its probes, a release gets what is derived from it rather than probed: the tables kb's tests replay
(`write_tables`: the serve command's flag table, tests/data/<lib>/<release>/flags.json, read from the release's own
parser) and its engine-release record, drafted from its own evidence (kbtool/probe/release_record.py; a record read
by hand is never overwritten), which the sweep's change report then compares with the release before it.

Installs are byte-compiled (a container's PYTHONDONTWRITEBYTECODE=1 would otherwise recompile every module a grid
imports again) and take the overrides recorded for the release in probes/sweep-overrides.yaml (or given with
`--override`) when its own pins do not resolve: uv's `--override`, written into the environment as
`kb-install.json`, which the evidence's environment then names (kbtool/probe/engine.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbtool.errors import ProbeError, UsageError
from kbtool.probe.stopping import terminate_raises
from kbtool.solve.conditions import compare_versions, version_key

REGISTRY = "https://pypi.org/pypi/{dist}/json"
# library -> (distribution, the probes its sweep runs, the variable naming the engine interpreter)
LIBRARIES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "vllm": ("vllm", ("vllm-selector", "vllm-rocm-selector", "vllm-options", "vllm-kv-planning",
                      "vllm-engine-config"),
             "KB_VLLM_PYTHON"),
    # SGLang's argument resolution and its pool planning, both without a GPU (issue 44)
    "sglang": ("sglang", ("sglang-resolve", "sglang-pool"), "KB_SGLANG_PYTHON"),
}
PRE = re.compile(r"(a|b|rc|alpha|beta|dev|pre|preview)\d*", re.IGNORECASE)
STATE = "sweep-state.json"
OVERRIDES = Path(__file__).resolve().parents[2] / "probes" / "sweep-overrides.yaml"
INSTALL_NOTE = "kb-install.json"  # in the environment: what the install replaced (read by kbtool/probe/engine.py)
# library -> the engine name probes/_serve_flags.py takes (the flag table kb reads serve lines with)
SERVE_FLAGS = {"vllm": "vllm", "sglang": "sglang"}
INCOMPLETE = ("ERROR", "TIMEOUT", "SKIPPED", "OOM")  # a case outcome that leaves the run short of a record
LOG_TAIL = 12


@dataclass
class Task:
    release: str
    probes: list[str]
    retry: list[str] = field(default_factory=list)  # evidence of an earlier run that did not complete
    overrides: list[str] = field(default_factory=list)
    gap: bool = False  # never swept, between releases that were (`gaps`)


@dataclass
class ReleaseResult:
    release: str
    status: str  # ok | failed | skipped
    probes: dict[str, str] = field(default_factory=dict)  # probe -> ok | failed: why | skipped (evidence exists)
    evidence: list[str] = field(default_factory=list)
    install_s: float = 0.0
    probe_s: float = 0.0
    why: str | None = None
    overrides: list[str] = field(default_factory=list)  # requirements that replaced the release's own pins
    probe_seconds: dict[str, float] = field(default_factory=dict)  # probe -> its wall seconds (where the time goes)
    cleanup_s: float = 0.0  # deleting the environment and pruning the cache
    tables: dict[str, str] = field(default_factory=dict)  # derived test table -> ok (its path) | failed: why
    record: dict[str, Any] | None = None  # the drafted engine-release record (ReleaseDraft.to_dict)


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

    return sorted(set(versions), key=version_key)


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


def _sweep_evidence(records: Path, lib: str) -> list[tuple[str, str, str, bool]]:
    """(release, probe, evidence id, complete) for the library's sweep probes' evidence under records/evidence.
    A run is complete when no case ended ERROR, TIMEOUT, OOM or SKIPPED and it has cases at all."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    probes = set(library(lib)[1])
    out = []
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
            cases = [c for c in rec.get("cases") or [] if isinstance(c, dict)]
            complete = bool(cases) and not any(c.get("outcome") in INCOMPLETE for c in cases)
            out.append((str(version), pid, str(rec.get("id")), complete))
    return out


def recorded(records: Path, lib: str) -> dict[tuple[str, str], list[str]]:
    """(release, probe) -> evidence ids of complete runs already under records/evidence for the sweep's probes."""
    out: dict[tuple[str, str], list[str]] = {}
    for version, pid, eid, complete in _sweep_evidence(records, lib):
        if complete:
            out.setdefault((version, pid), []).append(eid)
    return out


def incomplete(records: Path, lib: str) -> dict[tuple[str, str], list[str]]:
    """(release, probe) -> evidence ids of runs that did not complete, where no complete run of the pair exists:
    what the next sweep runs again."""
    have = recorded(records, lib)
    out: dict[tuple[str, str], list[str]] = {}
    for version, pid, eid, complete in _sweep_evidence(records, lib):
        if not complete and (version, pid) not in have:
            out.setdefault((version, pid), []).append(eid)
    return out


def newest_recorded(records: Path, lib: str) -> str | None:
    """The newest release the sweep's first probe (its selection grid) recorded completely: a probe added later
    (vllm-engine-config) recorded alone for a release does not make that release swept."""
    first = library(lib)[1][0]
    versions = [v for v, p in recorded(records, lib) if p == first]
    return sort_versions(versions)[-1] if versions else None


def new_releases(records: Path, lib: str, registry: list[str]) -> list[str]:
    """`--new`: the registry's releases newer than the newest with complete evidence, every release whose
    last run did not complete (failed, errored or timed out), and every release between the oldest and the newest
    recorded that no run has touched (`gaps`: SGLang 0.5.19-0.5.22 between 0.5.18 and 0.5.23 until they were
    swept), oldest first."""
    newest = newest_recorded(records, lib)
    retry = {v for v, _ in incomplete(records, lib)} | set(gaps(records, lib, registry))
    return [r for r in registry if r in retry or newest is None or compare_versions(r, newest) > 0]


def gaps(records: Path, lib: str, registry: list[str]) -> list[str]:
    """The registry's releases after the oldest the sweep recorded completely and before the newest that have no
    evidence of the sweep's probes at all (never swept, as against swept and incomplete), oldest first."""
    first = library(lib)[1][0]
    done = sort_versions([v for v, p in recorded(records, lib) if p == first])
    if len(done) < 2:
        return []
    touched = {version for version, _pid, _eid, _complete in _sweep_evidence(records, lib)}
    return [r for r in registry if r not in touched and compare_versions(r, done[0]) > 0
            and compare_versions(r, done[-1]) < 0]


def plan(records: Path, lib: str, releases: list[str], *, force: bool = False,
         probes: list[str] | None = None, overrides: list[str] | None = None) -> tuple[list[Task], list[str]]:
    """Tasks (release, the probes it lacks) and the releases skipped because their evidence exists."""
    have = recorded(records, lib)
    failed = incomplete(records, lib)
    wanted = probes or list(library(lib)[1])
    between = set(gaps(records, lib, releases))
    tasks, skipped = [], []
    for r in releases:
        missing = [p for p in wanted if force or (r, p) not in have]
        if missing:
            retry = sorted(e for p in missing for e in failed.get((r, p), []))
            tasks.append(Task(r, missing, retry, release_overrides(lib, r, overrides), gap=r in between))
        else:
            skipped.append(r)
    return tasks, skipped


def recorded_overrides(path: Path = OVERRIDES) -> dict[str, dict[str, dict[str, Any]]]:
    """probes/sweep-overrides.yaml: library -> release -> {override: [requirement, ...], why: text}."""
    import yaml

    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not YAML: {exc}", fix="fix the file (a mapping library -> release -> "
                         "{override: [...], why: ...})") from exc
    bad = not isinstance(data, dict) or not all(
        isinstance(rels, dict) and all(isinstance(v, dict) and isinstance(v.get("override"), list)
                                       and isinstance(v.get("why"), str) for v in rels.values())
        for rels in data.values())
    if bad:
        raise UsageError(f"{path}: each entry must be library -> 'release' -> {{override: [requirement, ...], "
                         "why: text}", fix="see CONTRIBUTING.md, 'Sweeping releases'")
    return {str(lib): {str(r): v for r, v in rels.items()} for lib, rels in data.items()}


def release_overrides(lib: str, release: str, extra: list[str] | None = None, path: Path = OVERRIDES) -> list[str]:
    """The requirements that replace a release's own pins: those recorded for it, then `extra` (`--override`),
    a later one for the same distribution winning."""
    found = [str(x) for x in (recorded_overrides(path).get(lib, {}).get(release) or {}).get("override", [])]
    by_dist: dict[str, str] = {}
    for req in found + list(extra or []):
        name = re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower().replace("_", "-")
        if not name:
            raise UsageError(f"override '{req}' names no distribution", fix="give a requirement, e.g. pkg==1.2.3")
        by_dist[name] = req
    return list(by_dist.values())


def _uv() -> str | None:
    found = shutil.which("uv")
    if found:
        return found
    beside = Path(sys.executable).with_name("uv")
    return str(beside) if beside.exists() else None


def install(lib: str, release: str, venv: Path, python: str, log: Path, cache: Path | None = None,
            overrides: list[str] | None = None) -> None:
    """A fresh environment at `venv` holding `dist==release` and what it pins (uv when present, else pip),
    byte-compiled (uv's --compile-bytecode; pip's --compile, which a pip configured not to compile would
    otherwise leave out). `overrides` replace the release's own pins (uv only). uv's cache is $UV_CACHE_DIR, else
    `cache`, else `venv`'s folder/uv-cache. A failed step raises with the last lines of its output."""
    dist = library(lib)[0]
    if venv.exists():
        shutil.rmtree(venv)
    uv = _uv()
    env = dict(os.environ)
    if overrides and not uv:
        raise ProbeError(f"installing {dist}=={release} with overrides ({', '.join(overrides)}) needs uv",
                         fix="pip install uv (beside this interpreter or on PATH), then run again")
    if uv:
        env.setdefault("UV_CACHE_DIR", str(cache or venv.parent / "uv-cache"))
        install_cmd = [uv, "pip", "install", "-q", "--compile-bytecode", "-p", str(venv / "bin" / "python"),
                       f"{dist}=={release}"]
        if overrides:
            venv.parent.mkdir(parents=True, exist_ok=True)
            spec = venv.parent / f"overrides-{dist}-{release}.txt"
            spec.write_text("".join(f"{r}\n" for r in overrides), encoding="utf-8")
            install_cmd += ["--override", str(spec)]
        steps = [[uv, "venv", "-q", "-p", python, str(venv)], install_cmd]
    else:
        steps = [[python, "-m", "venv", str(venv)],
                 [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--compile", f"{dist}=={release}"]]
    for cmd in steps:
        code, tail = _logged(cmd, log, env)
        if code != 0:
            why = "\n  ".join(tail) or "(no output)"
            raise ProbeError(f"installing {dist}=={release} failed (exit {code}); the log ({log}) ends:\n  {why}",
                             fix=f"if the release's own pins do not resolve, record an override for {release} in "
                                 f"{OVERRIDES.name} or pass --override PKG==VERSION")
    (venv / INSTALL_NOTE).write_text(json.dumps({"release": release, "overrides": list(overrides or [])}) + "\n",
                                     encoding="utf-8")


def _logged(cmd: list[str], log: Path, env: dict[str, str], timeout: float = 3600) -> tuple[int, list[str]]:
    """Run `cmd` with its output appended to `log`: (exit code, the last lines it printed)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        start = fh.tell()
        code = _run_group(cmd, stdout=fh, env=env, timeout=timeout)
    with log.open("rb") as fh:
        fh.seek(start)
        lines = fh.read().decode("utf-8", "replace").strip().splitlines()
    return code, [ln[:300] for ln in lines[-LOG_TAIL:]]


def _run_group(cmd: list[str], *, stdout: Any, env: dict[str, str], timeout: float,
               cwd: Path | None = None, stderr: Any = subprocess.STDOUT) -> int:
    """Run `cmd` in its own process group, ended (with all it started) when it overruns `timeout` or when this
    process is interrupted or terminated (SIGINT, SIGTERM): a stopped sweep leaves no probe writing evidence."""
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env, cwd=cwd,
                            start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end_group(proc)
        return -signal.SIGKILL
    except BaseException:
        _end_group(proc)
        raise


def _end_group(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM to the process group (a `kb probe run` then ends its own workers), SIGKILL after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_probe(probe: str, interpreter: Path, env_var: str, root: Path, records: Path, log: Path,
              out: Path | None = None) -> tuple[bool, str, list[str]]:
    """`kb probe run --probe P` under the release's interpreter: (ok, why, evidence paths written)."""
    import tempfile

    cmd = [sys.executable, "-m", "kbtool", "probe", "run", "--probe", probe, "--json", "--kb", str(records)]
    if out is not None:
        cmd += ["--out", str(out)]
    env = dict(os.environ, **{env_var: str(interpreter)})
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        code = _run_group(cmd, stdout=fo, stderr=fe, env=env, timeout=7200, cwd=root)
        fo.seek(0)
        fe.seek(0)
        stdout, stderr = fo.read().decode("utf-8", "replace"), fe.read().decode("utf-8", "replace")
    with log.open("a", encoding="utf-8") as lf:
        lf.write(f"$ {env_var}={interpreter} {' '.join(cmd)}\n{stdout[-4000:]}\n{stderr[-4000:]}\n")
    try:
        report = json.loads(stdout)
    except ValueError:
        tail = (stderr or stdout).strip().splitlines()[-1:] or [f"exit {code}"]
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

    root = root or REPO_ROOT
    workdir.mkdir(parents=True, exist_ok=True)
    results: list[ReleaseResult] = []
    with terminate_raises():
        for task in tasks:
            results.append(_one(lib, task, records, workdir, python, root, on_step, keep))
    return results


def _one(lib: str, task: Task, records: Path, workdir: Path, python: str | None, root: Path,
         on_step: Callable[[str, str], None] | None, keep: bool) -> ReleaseResult:
    """One release: install, its probes, delete; its result saved in the state file."""
    dist, _, env_var = library(lib)
    log = workdir / "log"
    res = ReleaseResult(task.release, "ok", overrides=list(task.overrides))
    venv = workdir / f"{dist}-{task.release}"
    step = on_step or (lambda _r, _s: None)
    try:
        step(task.release, "install")
        t0 = time.monotonic()
        install(lib, task.release, venv, python or sys.executable, log, overrides=task.overrides)
        res.install_s = round(time.monotonic() - t0, 1)
        for probe in task.probes:
            step(task.release, probe)
            t1 = time.monotonic()
            ok, why, written = run_probe(probe, venv / "bin" / "python", env_var, root, records, log)
            res.probe_seconds[probe] = round(time.monotonic() - t1, 1)
            res.probe_s += res.probe_seconds[probe]
            res.evidence += written
            res.probes[probe] = "ok" if ok else f"failed: {why}"
        step(task.release, "tables")
        res.tables = write_tables(lib, task.release, venv / "bin" / "python", root, log)
        step(task.release, "record")
        res.record = draft_record(records, lib, task.release, root)
        if any(v != "ok" for v in res.probes.values()) or any(v != "ok" for v in res.tables.values()):
            res.status = "failed"
    except (ProbeError, OSError, subprocess.TimeoutExpired) as exc:
        res.status, res.why = "failed", str(exc)
    finally:
        t2 = time.monotonic()
        if not keep and venv.exists():
            shutil.rmtree(venv, ignore_errors=True)
        _prune_cache(venv.parent / "uv-cache", dist)
        res.cleanup_s = round(time.monotonic() - t2, 1)
    _save_state(workdir / STATE, res)
    step(task.release, res.status)
    return res


def write_tables(lib: str, release: str, interpreter: Path, root: Path, log: Path,
                 data: Path | None = None) -> dict[str, str]:
    """The tables derived from the release's own code that kb's tests replay, written under the release's
    interpreter: its serve command's flag table (probes/_serve_flags.py -> tests/data/<lib>/<release>/flags.json,
    held to kb's flag tables by tests/solve/test_serve_flags.py; `data`: another folder than tests/data).
    table -> "ok" | "failed: why"."""
    engine = SERVE_FLAGS.get(lib)
    if engine is None:
        return {}
    dest = (data or root / "tests" / "data") / lib / release / "flags.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(interpreter), str(root / "probes" / "_serve_flags.py"), engine, str(dest)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code, tail = _logged(cmd, log, env, timeout=600)
    if code != 0 or not dest.is_file():
        return {"flags": f"failed: exit {code}: {(tail or ['no output'])[-1]}"}
    return {"flags": "ok"}


def draft_record(records: Path, lib: str, release: str, root: Path) -> dict[str, Any] | None:
    """The release's engine-release record drafted from its evidence and written (kbtool/probe/release_record.py),
    as a dict for the state file and the report; None where the engine drafts none."""
    from kbtool.errors import KbError
    from kbtool.probe import release_record

    try:
        got = release_record.draft(records, lib, release, root=root, write=True)
    except KbError as exc:
        return {"release": release, "why": f"drafting failed: {exc}"}
    return None if got is None else got.to_dict()


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
