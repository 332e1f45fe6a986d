"""What SGLang's own recordings say changed between two releases (`kb diff --sglang A B`, the sweep's report).

Two recordings per release, both left by `kb probe sweep --lib sglang`:

- the sglang-resolve probe's grids (tests/data/sglang/X/<platform>.json.gz): per platform, model and server-argument
  line, what SGLang resolved (backend per phase, page size, KV dtype) or the error it raised. Per platform: how many
  lines common to both releases resolve differently, with the most frequent changes as examples;
- the sglang-pool probe's recordings (tests/data/sglang/X/pool-*.json.gz): per accelerator and model, the launch
  defaults SGLang picks (mem_fraction_static, chunked prefill, CUDA-graph batch, ...) and the pool it plans at each
  available-memory point (max_total_num_tokens, or its start-up error): changed defaults per field, and changed
  pools per model (the KV accounting).

A release without one of them gets a "missing" change saying so: nothing is filled in from another release.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from kbtool.solve.engines.results import ReleaseChange

EXAMPLES = 3
POOLS = ("pool-models", "pool-classes", "pool-defaults")


def folders() -> list[Path]:
    """Where recorded grids live: the checkout's tests/data/sglang, else the installed copy's kbtool/_data/sglang."""
    import kbtool
    from kbtool.paths import records_dir

    return [records_dir().parent / "tests" / "data" / "sglang", Path(kbtool.__file__).parent / "_data" / "sglang"]


def _dir(version: str) -> Path | None:
    return next((f / version for f in folders() if (f / version).is_dir()), None)


@functools.cache
def _load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def recorded() -> list[str]:
    """Releases with a recorded resolve grid or pool recording, oldest first."""
    from kbtool.solve.conditions import version_key

    found = {p.name for f in folders() if f.is_dir() for p in f.iterdir() if p.is_dir() and any(p.glob("*.json.gz"))}
    return sorted(found, key=version_key)


def _where(path: Path) -> str:
    return "/".join(path.parts[-5:])


def _resolved(doc: dict[str, Any]) -> dict[tuple[Any, ...], str]:
    """(model, tag, argv) -> the resolution in words: backends per phase, page size, KV dtype, or the error."""
    argvs, outcomes = doc.get("argvs") or [], doc.get("outcomes") or []
    out = {}
    for platform, model, tag, argv, outcome in doc.get("rows") or []:
        o = outcomes[outcome] if isinstance(outcome, int) and outcome < len(outcomes) else {}
        if o.get("error"):
            words = f"error {o['error']}"
        else:
            words = f"{o.get('prefill')}/{o.get('decode')} page {o.get('page_size')} kv {o.get('kv_cache_dtype')}"
        line = " ".join(str(a) for a in argvs[argv]) if isinstance(argv, int) and argv < len(argvs) else str(argv)
        out[(platform, model, tag, line)] = words
    return out


def resolve_changes(a: str, b: str) -> list[ReleaseChange]:
    """Per platform, the server-argument lines whose resolution differs."""
    da, db = _dir(a), _dir(b)
    ga = {p.name[:-len(".json.gz")]: p for p in sorted(da.glob("*.json.gz")) if not p.name.startswith("pool-")} \
        if da else {}
    gb = {p.name[:-len(".json.gz")]: p for p in sorted(db.glob("*.json.gz")) if not p.name.startswith("pool-")} \
        if db else {}
    missing = [ReleaseChange(group="missing", key=v, note=f"no recorded resolve grid for {v}")
               for v, g in ((a, ga), (b, gb)) if not g]
    if missing:
        return missing
    out = []
    for key in sorted(set(ga) & set(gb)):
        sa, sb = _resolved(_load(ga[key])), _resolved(_load(gb[key]))
        common = [k for k in sa if k in sb]
        moved = [k for k in common if sa[k] != sb[k]]
        if moved:
            kinds = Counter((sa[k], sb[k]) for k in moved)
            first: dict[tuple[str, str], tuple[Any, ...]] = {}
            for k in moved:
                first.setdefault((sa[k], sb[k]), k)
            ex = [f"{o} -> {n} at {c:,} line(s), e.g. {first[(o, n)][1]} {first[(o, n)][3] or '(no flags)'}"
                  for (o, n), c in kinds.most_common(EXAMPLES)]
            out.append(ReleaseChange(group="selection", key=key, count=len(moved), of_total=len(common),
                                     examples=ex, source=_where(gb[key])))
    return out


# the sglang-pool worker's temporary model folder, named in SGLang's messages by recordings made before issue 46
# (a fresh name each run, so every such message "changed"); the worker now writes MODEL_ROOT in its place
_MODEL_FOLDER = re.compile(r"/(?:[^\s/]+/)*kb-sglang-pool-[A-Za-z0-9_]+")
MODEL_ROOT = "<models>"  # probes/_sglang_pool.py MODEL_ROOT


def stable(value: Any) -> Any:
    """A recorded value with the worker's temporary model folder named MODEL_ROOT (older recordings)."""
    return _MODEL_FOLDER.sub(MODEL_ROOT, value) if isinstance(value, str) else value


def _pool_rows(path: Path) -> dict[tuple[Any, ...], tuple[dict[str, Any], list[Any]]]:
    return {(r[0], r[1], r[2]): ({k: stable(v) for k, v in r[3].items()}, r[4] if len(r) > 4 else [])
            for r in _load(path).get("rows") or []}


def _pool(p: Any) -> Any:
    if isinstance(p, dict) and p.get("error"):
        return f"error {p['error']}"
    if isinstance(p, dict):
        return p.get("max_total_num_tokens")
    return p


def pool_changes(a: str, b: str) -> list[ReleaseChange]:
    """Changed launch defaults (per field) and changed pools (per model) over the pool recordings both have."""
    da, db = _dir(a), _dir(b)
    pairs = [(da / f"{n}.json.gz", db / f"{n}.json.gz") for n in POOLS
             if da and db and (da / f"{n}.json.gz").is_file() and (db / f"{n}.json.gz").is_file()]
    if not pairs:
        return [ReleaseChange(group="missing", key=f"{a}/{b}", note="no pool recording of both releases")]
    fields: dict[str, list[str]] = {}
    models: dict[str, list[str]] = {}
    totals: Counter[str] = Counter()
    src = _where(pairs[0][1])
    for pa, pb in pairs:
        ra, rb = _pool_rows(pa), _pool_rows(pb)
        for k in sorted(set(ra) & set(rb), key=str):
            (dfa, pla), (dfb, plb) = ra[k], rb[k]
            for f in sorted(set(dfa) | set(dfb)):
                if dfa.get(f) != dfb.get(f):
                    fields.setdefault(f, []).append(f"{k[0]} {k[1]}: {dfa.get(f)} -> {dfb.get(f)}")
            totals[k[1]] += len(pla)
            for i, (x, y) in enumerate(zip(pla, plb, strict=False)):
                if _pool(x) != _pool(y):
                    models.setdefault(k[1], []).append(f"{k[0]} point {i + 1}: {_pool(x)} -> {_pool(y)}")
    out = [ReleaseChange(group="defaults", key=f, count=len(v), examples=sorted(set(v))[:EXAMPLES], source=src)
           for f, v in sorted(fields.items(), key=lambda kv: -len(kv[1]))]
    out += [ReleaseChange(group="accounting", key=m, count=len(v), of_total=totals[m], examples=v[:EXAMPLES],
                          source=src) for m, v in sorted(models.items(), key=lambda kv: -len(kv[1]))]
    return out


def release_changes(a: str, b: str) -> list[ReleaseChange]:
    return resolve_changes(a, b) + pool_changes(a, b)
