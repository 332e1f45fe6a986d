"""What vLLM's own recordings say changed between two releases (`kb diff --vllm A B`, issue 46).

Two recordings per release are compared, both left by `kb probe sweep`:

- the vllm-selector probe's grids (tests/data/vllm/X/cc*.json.gz, rocm-gfx942.json.gz; read through grid.py):
  the backends the release registers, and at every grid point the backend its own selector picked. Per compute
  capability: backends new and removed, and how many points common to both grids changed their selected backend,
  with a few of them as examples;
  and, per compute capability, how many points' priority list (the order the selector tries) changed;
- the vllm-engine-config probe's release facts (tests/data/vllm/X/engine-config.json.gz, `release`): whether the V1
  model runner module exists, the extensible KV cache's margins, EngineArgs' gpu_memory_utilization default;
- the vllm-kv-planning probe's plans (tests/data/vllm/X/kv-planning.json.gz): per recorded model, the points (the
  same available memory, max_model_len, batch and state mode) whose blocks, tokens, concurrency or start-up check
  differ: the release's KV accounting.

A release without one of them gets a "missing" change saying so: nothing is filled in from another release.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

from kbtool.solve.engines.results import ReleaseChange
from kbtool.solve.engines.vllm import grid

EXAMPLES = 3  # selection changes shown per compute capability
FACTS = {  # engine-config release fact -> what it is, in vLLM's code
    "v1_model_runner_module": "V1 model runner module (vllm/v1/worker/gpu_model_runner.py)",
    "extensible_kv_cache": "extensible KV cache margins (vllm/v1/worker/extensible_kv_cache.py)",
    "engine_args_gpu_memory_utilization": "EngineArgs.gpu_memory_utilization default (vllm/engine/arg_utils.py)",
}


def _grids(version: str) -> dict[str, Path]:
    """The release's recorded selector grids by platform key ("8.0", ..., "rocm-gfx942")."""
    out: dict[str, Path] = {}
    for f in grid.folders():
        d = f / version
        if not d.is_dir():
            continue
        for p in sorted(d.glob("cc*.json.gz")):
            out.setdefault(p.name[2:-len(".json.gz")], p)
        rocm = d / f"rocm-{grid.ROCM_ARCH}.json.gz"
        if rocm.is_file():
            out.setdefault(f"rocm-{grid.ROCM_ARCH}", rocm)
    return out


def _config(version: str) -> Path | None:
    return grid._file(version, "engine-config.json.gz")


@functools.cache
def _config_doc(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def recorded() -> list[str]:
    """Releases with a recorded selector grid or engine-config resolution, oldest first."""
    from kbtool.solve.conditions import version_key

    found = {p.name for f in grid.folders() if f.is_dir() for p in f.iterdir()
             if any(p.glob("cc*.json.gz")) or (p / "engine-config.json.gz").is_file()}
    return sorted(found, key=version_key)


def _where(path: Path) -> str:
    """The recorded file as the checkout names it (tests/data/vllm/X/NAME)."""
    return "/".join(path.parts[-5:])


def _point(axes: list[Any]) -> str:
    """A grid point's axes in words: layout, head dim, dtype, KV dtype, block size, sinks, TRT-LLM kernels."""
    _, trtllm, layout, head_dim, dtype, kv, block, sinks = axes
    words = [f"{layout} hd{head_dim}", str(dtype), f"kv {kv}"]
    if block is not None:
        words.append(f"block {block}")
    if sinks:
        words.append("sinks")
    if trtllm:
        words.append("trtllm")
    return " ".join(words)


def _plain(doc: dict[str, Any]) -> list[list[Any]]:
    """The rows both releases' grids have: use_mm_prefix False (a grid of probe version 4 asks True as well at
    dense points, in a 12th column; one recorded before has only the default) and has_sliding_window False (version
    5, a 13th column where the release's selector has the field, issue 46)."""
    return [r for r in doc["rows"] if not (len(r) > 11 and r[11]) and not (len(r) > 12 and r[12])]


def _selected(doc: dict[str, Any]) -> dict[tuple[Any, ...], str | None]:
    return {tuple(r[:8]): r[8] for r in _plain(doc)}


def _priorities(doc: dict[str, Any]) -> dict[tuple[Any, ...], tuple[str, ...]]:
    """Each grid point's priority list: the backends the selector tries there, in order."""
    lists = [tuple(p) for p in doc["priorities"]]
    return {tuple(r[:8]): lists[r[9]] for r in _plain(doc)}


def _order_change(old: tuple[str, ...], new: tuple[str, ...]) -> str:
    """A priority list's change in words: what was added, dropped, or only reordered."""
    added, dropped = [b for b in new if b not in old], [b for b in old if b not in new]
    words = [f"+{', +'.join(added)}"] if added else []
    words += [f"-{', -'.join(dropped)}"] if dropped else []
    return "; ".join(words) or f"reordered: {' > '.join(new)}"


def _examples(moved: list[tuple[Any, ...]], sa: dict[tuple[Any, ...], str | None],
              sb: dict[tuple[Any, ...], str | None]) -> list[str]:
    """One example per distinct change (old -> new), the most frequent first, with how many points made it."""
    from collections import Counter

    def word(v: str | None) -> str:
        text = v or "none"
        return text if len(text) <= 60 else text[:57] + "..."

    counts = Counter((sa[p], sb[p]) for p in moved)
    first: dict[tuple[str | None, str | None], tuple[Any, ...]] = {}
    for p in moved:
        first.setdefault((sa[p], sb[p]), p)
    return [f"{word(o)} -> {word(n)} at {k:,} point(s), e.g. {_point(list(first[(o, n)]))}"
            for (o, n), k in counts.most_common(EXAMPLES)]


def grid_changes(a: str, b: str) -> list[ReleaseChange]:
    """Backends new/removed and selection changes per platform, from the two releases' selector grids."""
    ga, gb = _grids(a), _grids(b)
    missing = [ReleaseChange(group="missing", key=v, note=f"no recorded selector grid for {v}")
               for v, g in ((a, ga), (b, gb)) if not g]
    if missing:
        return missing
    out: list[ReleaseChange] = []
    for key in sorted(set(ga) | set(gb), key=lambda k: (k.startswith("rocm"), 0.0 if k.startswith("rocm")
                                                          else float(k), k)):
        if key not in ga or key not in gb:
            v = a if key not in ga else b
            out.append(ReleaseChange(group="missing", key=key, note=f"no recorded selector grid for {v} on {key}"))
            continue
        da, db = grid._load(ga[key]), grid._load(gb[key])
        src = f"{_where(gb[key])} (vLLM commit {db.get('commit') or '?'})"
        new = sorted(set(db["backends"]) - set(da["backends"]))
        gone = sorted(set(da["backends"]) - set(db["backends"]))
        if new or gone:
            out.append(ReleaseChange(group="backends", key=key, old=gone, new=new, source=src))
        sa, sb = _selected(da), _selected(db)
        common = [p for p in sa if p in sb]
        moved = [p for p in common if sa[p] != sb[p]]
        only = len(set(sa) ^ set(sb))
        note = f"{only} point(s) on one grid only (the grids' axes differ)" if only else None
        if moved or note:
            ex = _examples(moved, sa, sb)
            out.append(ReleaseChange(group="selection", key=key, old=None, new=None, count=len(moved),
                                     of_total=len(common), examples=ex, source=src, note=note))
        pa, pb = _priorities(da), _priorities(db)
        reordered = [p for p in common if pa[p] != pb[p]]
        if reordered:
            from collections import Counter

            kinds = Counter(_order_change(pa[p], pb[p]) for p in reordered)
            out.append(ReleaseChange(group="priorities", key=key, count=len(reordered), of_total=len(common),
                                     examples=[f"{w} at {k:,} point(s)" for w, k in kinds.most_common(EXAMPLES)],
                                     source=src))
    return out


PLAN_INPUTS = ("async", "available", "batched_tokens", "max_model_len", "mamba_mode", "checkpoint_blocks",
               "prefix_caching")
PLAN_RESULTS = ("num_blocks", "tokens", "concurrency", "starts")


def _plans(doc: dict[str, Any]) -> dict[tuple[Any, ...], dict[tuple[Any, ...], tuple[Any, ...]]]:
    """(model, kv, tp) -> point inputs -> (block, the point's results)."""
    out: dict[tuple[Any, ...], dict[tuple[Any, ...], tuple[Any, ...]]] = {}
    for c in doc.get("cases") or []:
        pts = out.setdefault((c.get("model"), c.get("kv"), c.get("tp")), {})
        for p in c.get("points") or []:
            pts[tuple(p.get(k) for k in PLAN_INPUTS)] = (c.get("block"), *(p.get(k) for k in PLAN_RESULTS))
    return out


def _plan_words(inputs: tuple[Any, ...], old: tuple[Any, ...], new: tuple[Any, ...]) -> str:
    at = dict(zip(PLAN_INPUTS, inputs, strict=True))
    where = f"{at['available'] / 2**30:g} GiB, max_model_len {at['max_model_len']:,}"
    names = ("block", *PLAN_RESULTS)
    moved = [f"{n} {_num(o)} -> {_num(w)}" for n, o, w in zip(names, old, new, strict=True) if o != w]
    return f"{where}: {', '.join(moved)}"


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return "-" if v is None else str(v)


def planning_changes(a: str, b: str) -> list[ReleaseChange]:
    """Per recorded model (and KV dtype, tensor parallel), the KV-planning points whose result differs."""
    pa, pb = grid._file(a, "kv-planning.json.gz"), grid._file(b, "kv-planning.json.gz")
    missing = [ReleaseChange(group="missing", key=v, note=f"no recorded KV planning for {v}")
               for v, p in ((a, pa), (b, pb)) if p is None]
    if missing or pa is None or pb is None:
        return missing
    da, db = _plans(grid._load(pa)), _plans(grid._load(pb))
    out = []
    for case in sorted(set(da) & set(db), key=str):
        common = [k for k in da[case] if k in db[case]]
        moved = [k for k in common if da[case][k] != db[case][k]]
        if moved:
            model, kv, tp = case
            out.append(ReleaseChange(group="accounting", key=f"{model} kv {kv}" + (f" tp {tp}" if tp != 1 else ""),
                                     count=len(moved), of_total=len(common), source=_where(pb),
                                     examples=[_plan_words(k, da[case][k], db[case][k]) for k in moved[:EXAMPLES]]))
    return sorted(out, key=lambda c: -(c.count or 0))


def config_changes(a: str, b: str) -> list[ReleaseChange]:
    """The engine-config probe's release facts that differ between the releases."""
    pa, pb = _config(a), _config(b)
    missing = [ReleaseChange(group="missing", key=v, note=f"no recorded engine-config resolution for {v}")
               for v, p in ((a, pa), (b, pb)) if p is None]
    if missing or pa is None or pb is None:
        return missing
    ra, rb = _config_doc(pa).get("release") or {}, _config_doc(pb).get("release") or {}
    out = []
    for k in sorted(set(ra) | set(rb)):
        va, vb = ra.get(k), rb.get(k)
        if va != vb:
            if k.endswith("_module"):  # whether the module imports in the release
                va, vb = ("present" if v else "removed" for v in (va, vb))
            out.append(ReleaseChange(group="release", key=k, old=va, new=vb, source=_where(pb), note=FACTS.get(k)))
    return out


def release_changes(a: str, b: str) -> list[ReleaseChange]:
    return config_changes(a, b) + grid_changes(a, b) + planning_changes(a, b)
