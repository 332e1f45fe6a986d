"""Sweep kb's engine answers for picked backends whose every kernel kb refuses (the kernel check of decide()).

    python benchmarks/picked_refusals_sweep.py OUT.jsonl [--releases] [--workers 2]
    python benchmarks/picked_refusals_sweep.py --compare BEFORE.jsonl AFTER.jsonl

Default grid: every recorded GPU x model at TP 1 and 8, bf16 and fp8 KV, ctx 4096, plus head dims 64-576 without a
model (ctx 32k), under both engines at their newest recorded release (23,496 queries on the shipped KB, ~2 min on 2
idle cores). --releases: one GPU per architecture over every other recorded release (101,816). Each row keeps the
verdict, the decision case, the picked backend, its kernels' statuses, its recorded calls, and the reasons (claim,
code) of each kernel it runs. --compare prints the verdict transitions grouped by backend, case and refusing claims.
"""

from __future__ import annotations

import collections
import json
import sys
from multiprocessing import Pool
from pathlib import Path
from typing import Any

ARCH_GPUS = ["amd-mi300x", "amd-mi355x", "nvidia-a10", "nvidia-a100-80gb-sxm", "nvidia-b200", "nvidia-b300",
             "nvidia-gb10", "nvidia-h200-sxm", "nvidia-l40s", "nvidia-rtx-pro-6000-blackwell", "nvidia-t4"]
HEAD_DIMS = [64, 80, 96, 128, 192, 256, 512, 576]
_CAPTURED: dict[str, Any] = {}
_IMG: Any = None


def grid(releases: bool) -> list[dict[str, Any]]:
    from kbtool.query_cli import image
    from kbtool.solve.engines import registry

    img = image()
    models = sorted(p.stem for p in Path("records/models").glob("*.yaml"))
    out: list[dict[str, Any]] = []
    for engine in registry.names():
        rels = registry.get(engine).recorded_releases(img)[:-1] if releases else [None]
        gpus = ARCH_GPUS if releases else [a.id for a in img.accelerators()]
        for rel in rels:
            pin = {engine: rel} if rel else {}
            for g in gpus:
                out += [{"gpu": g, "model": m, "gpus": n, "kv": kv, "ctx": "4096", "engine": engine, **pin}
                        for m in models for n in (1, 8) for kv in (None, "fp8")]
                out += [{"gpu": g, "head_dim": hd, "kv": kv, "ctx": "32k", "engine": engine, **pin}
                        for hd in HEAD_DIMS for kv in (None, "fp8")]
    return out


def _init() -> None:
    global _IMG
    import kbtool.solve.solver as solver
    from kbtool.query_cli import image

    real = solver.picked_refusals

    def spy(cx: Any, pick: Any, kstat: Any) -> Any:
        out = real(cx, pick, kstat)
        _CAPTURED["refusals"] = out
        return out

    solver.picked_refusals = spy
    _IMG = image()


def _one(q: dict[str, Any]) -> dict[str, Any]:
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    _CAPTURED.clear()
    try:
        a = solve(_IMG, build_query(**q))
    except Exception as e:  # a usage error is a row too
        return {"q": q, "r": "ERR:" + type(e).__name__}
    d = a.decision
    row: dict[str, Any] = {"v": a.verdict, "case": d.case if d else None}
    if a.engine and a.engine.get("state") == "selected":
        picked = next((b for b in a.backends if b.id == a.engine["selected"]), None)
        if picked is not None:
            row.update(sel=picked.id, rel=a.engine.get("release"), kst=picked.kernels,
                       calls=sorted({(c["kernel"], c["phase"], c["build"] or "", c["status"]) for c in picked.calls}),
                       refusals=_CAPTURED.get("refusals", {}))
    return {"q": q, "r": row}


def compare(before: str, after: str) -> None:
    def load(p: str) -> dict[str, Any]:
        return {json.dumps(r["q"], sort_keys=True): r["r"] for r in map(json.loads, open(p))}

    def verdict(r: Any) -> Any:
        return r["v"] if isinstance(r, dict) else r

    b, a = load(before), load(after)
    moves: collections.Counter[Any] = collections.Counter()
    groups: collections.Counter[Any] = collections.Counter()
    for k, ra in a.items():
        rb = b.get(k)
        if rb is None or verdict(rb) == verdict(ra):
            continue
        moves[(verdict(rb), verdict(ra))] += 1
        if isinstance(ra, dict):
            refs = tuple(sorted({x for xs in (ra.get("refusals") or {}).values() for x in xs}))
            groups[(ra.get("rel"), ra.get("sel"), ra.get("case"), refs)] += 1
    print("moves", dict(moves))
    for g, n in groups.most_common():
        print(n, g)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--compare"]:
        compare(argv[1], argv[2])
        return
    out = argv[0]
    workers = int(argv[argv.index("--workers") + 1]) if "--workers" in argv else 2
    queries = grid("--releases" in argv)
    with Pool(workers, initializer=_init) as pool, open(out, "w") as f:
        for row in pool.imap_unordered(_one, queries, chunksize=20):
            f.write(json.dumps(row, default=list) + "\n")
    print(f"{len(queries)} queries -> {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
