"""A campaign plan (`kb probe campaign PLAN`, kbtool/probe/campaign.py): read, checked and expanded into tasks.

The plan is read through kbtool.store.untrusted (a regular file, at most LIMITS["plan"] bytes, UTF-8, the record
reader's depth and node limits, no aliases, so a FIFO, `/dev/zero` or an alias bomb is refused, not waited on).
Every value that becomes part of a path is a name checked against its grammar before it touches one: a release
(`0.19.1`, `0.7.2.post1`), a shard (`cc9.0`, `rocm-gfx942`), a probe id (`vllm-selector`), an accelerator type.
The cross product of an entry's lists is counted before it is expanded (at most MAX_TASKS tasks in a plan). Every
problem is a UsageError (exit 2) naming the plan, the path in it (`$.tasks[0].releases[2]`) and the fix.
`under(base, rel)` is the check every output path passes: relative, no `..`, and inside `base` once resolved.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbtool.errors import UsageError, WriteError

KINDS = ("probe", "release", "replay")
MAX_TASKS = 10_000  # the largest real plan has 36; three 1,000-item lists would be 10^9
MAX_GPUS = 64
KEYS = {"kind", "release", "releases", "probe", "probes", "shard", "shards", "num_gpus", "accelerator_type"}
GRAMMAR = {  # name -> (pattern, example, what it is called)
    "release": (re.compile(r"[0-9][0-9A-Za-z]*(?:[.+-][0-9A-Za-z]+){0,8}"), "0.19.1", "a release"),
    "shard": (re.compile(r"cc[0-9]{1,2}\.[0-9]{1,2}|rocm-[a-z0-9]{1,16}"), "cc9.0", "a shard"),
    "probe": (re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+){0,15}"), "vllm-selector", "a probe id"),
    "accelerator_type": (re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"), "H200", "an accelerator type"),
    "name": (re.compile(r"[A-Za-z0-9][A-Za-z0-9_. -]{0,99}"), "vllm-two-releases", "a plan name"),
}


@dataclass(frozen=True)
class Task:
    id: str
    kind: str
    probe: str | None = None
    release: str | None = None
    shard: str | None = None
    num_gpus: float = 0
    accelerator_type: str | None = None


def check_name(what: str, value: Any, where: str) -> str:
    """`value` as a name of kind `what` (a key of GRAMMAR), or a UsageError located at `where`."""
    pattern, example, noun = GRAMMAR[what]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        fix = f"quote it: '{value}'" if isinstance(value, float) else f"write {noun} such as {example}"
        raise UsageError(f"{where}: {noun} must be a string, not {type(value).__name__} ({str(value)[:40]!r})",
                         fix=fix)
    text = str(value)
    if len(text) > 100 or not pattern.fullmatch(text):
        raise UsageError(f"{where}: {text[:100]!r} is not {noun}", fix=f"write {noun} such as {example}")
    return text


def _names(entry: dict[str, Any], one: str, many: str, where: str) -> list[str | None]:
    if one in entry and many in entry:
        raise UsageError(f"{where}: both `{one}` and `{many}`", fix=f"list them all under `{many}`")
    if many in entry:
        values = entry[many]
        if not isinstance(values, list):
            raise UsageError(f"{where}.{many}: a list expected, not {type(values).__name__} ({str(values)[:40]!r})",
                             fix=f"write `{many}: [...]`")
        if not values:
            raise UsageError(f"{where}.{many}: the list is empty", fix=f"name at least one, or drop `{many}`")
        return [check_name(one, v, f"{where}.{many}[{i}]") for i, v in enumerate(values)]
    if entry.get(one) is None:
        return [None]
    return [check_name(one, entry[one], f"{where}.{one}")]


def _gpus(value: Any, where: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_GPUS:
        raise UsageError(f"{where}.num_gpus: a number from 0 to {MAX_GPUS} expected, got {str(value)[:40]!r}",
                         fix="e.g. num_gpus: 1")
    return float(value)


def load_plan(path: Path) -> tuple[str, list[Task]]:
    """The plan's name and its tasks, expanded; a UsageError for anything else (see the module's docstring)."""
    from kbtool.store.reader import load_yaml
    from kbtool.store.untrusted import LIMITS

    doc = load_yaml(path, limit=LIMITS["plan"], aliases=False)  # a plan is a few lists of names: no alias belongs
    if not isinstance(doc, dict) or not isinstance(doc.get("tasks"), list):
        raise UsageError(f"{path}:1 $.tasks: the plan has no task list", fix="add `tasks: [{kind: ..., ...}]`")
    extra = sorted(str(k) for k in doc if k not in ("name", "tasks"))
    if extra:
        raise UsageError(f"{path}: $.{extra[0][:60]}: unknown key", fix="a plan has `name` and `tasks`")
    name = check_name("name", doc["name"], f"{path}: $.name") if doc.get("name") is not None else path.stem
    entries: list[tuple[str, str, list[tuple[str | None, str | None, str | None]], dict[str, Any]]] = []
    count = 0
    for i, entry in enumerate(doc["tasks"]):
        where = f"{path}: $.tasks[{i}]"
        if not isinstance(entry, dict) or entry.get("kind") not in KINDS:
            raise UsageError(f"{where}.kind: one of {', '.join(KINDS)} expected", fix="e.g. kind: replay")
        unknown = sorted(str(k) for k in entry if k not in KEYS)
        if unknown:
            raise UsageError(f"{where}.{unknown[0][:60]}: unknown key", fix=f"a task has {', '.join(sorted(KEYS))}")
        lists = (_names(entry, "release", "releases", where), _names(entry, "probe", "probes", where),
                 _names(entry, "shard", "shards", where))
        count += len(lists[0]) * len(lists[1]) * len(lists[2])
        if count > MAX_TASKS:
            raise UsageError(f"{where}: the plan expands to more than {MAX_TASKS:,} tasks",
                             fix="split it into smaller plans")
        entries.append((where, str(entry["kind"]), list(itertools.product(*lists)), entry))
    tasks: list[Task] = []
    for where, kind, combos, entry in entries:
        gpus = _gpus(entry.get("num_gpus"), where)
        acc = entry.get("accelerator_type")
        acc = None if acc is None else check_name("accelerator_type", acc, f"{where}.accelerator_type")
        for release, probe, shard in combos:
            if kind in ("release", "replay") and not release:
                raise UsageError(f"{where}.releases: a {kind} task needs a release", fix="add `releases: [X]`")
            if kind in ("probe", "release") and not probe:
                raise UsageError(f"{where}.probes: a {kind} task needs a probe", fix="add `probes: [P]`")
            if kind == "replay" and not shard:
                raise UsageError(f"{where}.shards: a replay task needs a shard", fix="add `shards: [cc9.0]`")
            tid = "-".join(str(x) for x in (kind, release, probe, shard) if x)
            tasks.append(Task(tid, kind, probe, release, shard, gpus, acc))
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise UsageError(f"{path}: a task is listed twice", fix="each (kind, release, probe, shard) once")
    return name, tasks


def under(base: Path, rel: str) -> Path:
    """`base / rel` when `rel` is a relative path without `..` that stays inside `base` once resolved (symlinks
    included); a WriteError naming both otherwise. Every path the campaign writes goes through here."""
    parts = Path(rel).parts
    if not rel or os.path.isabs(rel) or ".." in parts or "\0" in rel:
        raise WriteError(f"{rel[:200]!r}: not a path inside {base}; not written",
                         fix="a task may only return files under its own output folder")
    dest = base / rel
    real, top = os.path.realpath(dest), os.path.realpath(base)
    if not real.startswith(top.rstrip(os.sep) + os.sep):
        raise WriteError(f"{dest}: resolves to {real}, outside {base}; not written",
                         fix=f"remove the link that leads out of {base}")
    return dest
