"""Benchmark `kb query` and `kb validate` on synthetic KBs of 200, 2,000 and 10,000 records.

Not a test: it times whole `kb` processes (subprocess + time.perf_counter) and reports medians, each also as a
ratio to `python -c pass` timed in the same run. Run from the checkout, with the project installed:

    python benchmarks/bench.py              # 200, 2,000 and 10,000 records; table + benchmarks/results.json
    python benchmarks/bench.py --quick      # 200 records, one run each: catches crashes, judges nothing

The synthetic KBs are copies of the shipped records (so records have realistic sizes and shapes), repeated in
shards: shard 0 keeps the real ids, shard k renames every id and alias to `<id>-s<k>` and rewrites every
reference to match, so each shard is a complete, cross-linked KB of its own (claims point at their kernels,
accelerators at their architectures, topics at their claims, ...). A partial last shard takes records in
dependency order (architectures first, topics last), so nothing dangles. Evidence and measurement records
are left out (only probe and bench runs write those), and claim verification blocks that cite evidence are
reset to `unverified`. The shipped schema folder is copied beside the records.

Figures:
- warm query:      the same `kb query` again, its query image cached (kbtool/fastquery.py answers);
- warm new query:  a question not asked before (a new --ctx each run), query image cached: the solver runs
                   on the image, the tree is checked for changes, nothing is replayed;
- cold query:      every cache removed first (all YAML parsed and validated, caches written);
- validate:        `kb validate` with every cache removed first (incl. the KB601 verdict cache);
- validate warm:   `kb validate` again, its KB601 verdicts cached (a second run, e.g. the pre-commit hook);
- validate fmt:    the same on a KB whose records were first put in canonical form by `kb fmt` (then KB601
                   round-trips every file; the shipped records mostly lack the schema line, which KB601
                   reports without formatting). Only with --formatted; since the shipped records
                   are kept in canonical form (CI runs `kb fmt --check`), `validate` measures that too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parent.parent
ORDER = ["architectures", "hardware-parameters", "accelerators", "kernels", "engine-backends", "models", "claims",
         "topics"]
SIZES = [200, 2000, 10000]
QUERY = ["--gpu", "h100", "--ctx", "128k", "--kv", "fp8"]


# ---- synthetic KBs ------------------------------------------------------------------------------


def _templates(records: Path) -> list[tuple[str, str, str]]:
    """(folder, id, text) of every shipped record that a synthetic KB copies, in dependency order."""
    out = []
    for folder in ORDER:
        for f in sorted((records / folder).glob("*.yaml")):
            text = f.read_text("utf-8")
            m = re.search(r"^id: *['\"]?([^'\"\s]+)", text, re.M)
            if m:
                out.append((folder, m.group(1), _drop_evidence(text)))
    return out


def _drop_evidence(text: str) -> str:
    """A verification block that cites evidence becomes `{status: unverified}` (no evidence is copied)."""
    m = re.search(r"^verification:.*\n((?:[ -].*\n|\n)*)", text, re.M)
    if m and "evidence" in m.group(0):
        return text[: m.start()] + "verification: {status: unverified}\n" + text[m.end():]
    return text


def formatted_templates(work: Path) -> Path:
    """The shipped records (the kinds a synthetic KB copies), put in canonical form by `kb fmt`."""
    dest = work / "formatted"
    if not dest.exists():
        for folder in ORDER:
            shutil.copytree(CHECKOUT / "records" / folder, dest / "records" / folder)
        shutil.copytree(CHECKOUT / "schema", dest / "schema")
        subprocess.run([*_kb(), "fmt", "--kb", str(dest / "records")], env={**os.environ, "KB_CACHE_DIR": ""},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return dest / "records"


def generate(n: int, dest: Path, records: Path = CHECKOUT / "records", schema: Path = CHECKOUT / "schema") -> Path:
    """Write a synthetic KB of `n` records under dest/records (and the schema under dest/schema)."""
    templates = _templates(records)
    ids = sorted({t[1] for t in templates}, key=len, reverse=True)
    token = re.compile(r"(?<![\w.-])(" + "|".join(re.escape(i) for i in ids) + r")(?![\w-]|\.\w)")
    deps = {rid: {m.group(1) for m in token.finditer(text)} - {rid} for _, rid, text in templates}
    templates = _referenced_first(templates, deps)
    root = dest / "records"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(schema, dest / "schema")
    written, shard = 0, 0
    while written < n:
        chosen = templates if n - written >= len(templates) else _closed_prefix(templates, deps, n - written)
        for folder, rid, text in chosen:
            if shard:
                suffix = f"-s{shard}"
                text = token.sub(lambda m, s=suffix: m.group(1) + s, text)
                text = re.sub(r"^aliases: *\[(.*)\]", lambda m, s=suffix: "aliases: [" + ", ".join(
                    _suffix(a.strip(), s) for a in m.group(1).split(",") if a.strip()) + "]", text, flags=re.M)
                rid += suffix
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / folder / f"{rid}.yaml").write_text(text, "utf-8")
            written += 1
        shard += 1
    return root


def _referenced_first(templates: list[tuple[str, str, str]], deps: dict[str, set[str]]) -> list[tuple[str, str, str]]:
    """Every record after the records it mentions, where there is no cycle."""
    placed: set[str] = set()
    out: list[tuple[str, str, str]] = []
    left = list(templates)
    while left:
        i = next((k for k, t in enumerate(left) if deps[t[1]] <= placed), 0)  # a cycle: take the first
        out.append(left.pop(i))
        placed.add(out[-1][1])
    return out


def _closed_prefix(templates: list[tuple[str, str, str]], deps: dict[str, set[str]], k: int) \
        -> list[tuple[str, str, str]]:
    """`k` records whose references all point inside the set (a partial shard must not dangle)."""
    out: list[tuple[str, str, str]] = []
    have: set[str] = set()
    for t in templates:
        if len(out) == k:
            break
        if deps[t[1]] <= have:
            out.append(t)
            have.add(t[1])
    return out


def _suffix(alias: str, suffix: str) -> str:
    return alias[:-1] + suffix + alias[-1] if alias[:1] in "'\"" and len(alias) > 1 else alias + suffix


# ---- timing -------------------------------------------------------------------------------------


def _kb() -> list[str]:
    script = Path(sys.executable).parent / "kb"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "kbtool"]


def _time(cmd: list[str], env: dict[str, str], before: object = None) -> tuple[float, float]:
    """Wall seconds (perf_counter around the whole process) and its CPU seconds (user + system)."""
    if callable(before):
        before()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:  # a synthetic KB must validate without errors, and a query must answer
        raise SystemExit(f"bench: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def measure(cmd: list[str], env: dict[str, str], runs: int, before: object = None,
            vary: object = None) -> dict[str, float]:
    """Median wall seconds of `cmd` and of `python -c pass`, run in turn; their ratio."""
    bare = [sys.executable, "-c", "pass"]
    a, b, ca, cb = [], [], [], []
    for i in range(runs):
        c = vary(i) if callable(vary) else cmd
        wall, cpu = _time(c, env, before)
        a.append(wall)
        ca.append(cpu)
        wall, cpu = _time(bare, env)
        b.append(wall)
        cb.append(cpu)
    med, base = statistics.median(a), statistics.median(b)
    cpu, cpu_base = statistics.median(ca), statistics.median(cb)
    return {"median_s": round(med, 4), "min_s": round(min(a), 4), "max_s": round(max(a), 4), "runs": runs,
            "bare_s": round(base, 4), "ratio": round(med / base, 2),
            "cpu_s": round(cpu, 4), "bare_cpu_s": round(cpu_base, 4),
            "cpu_ratio": round(cpu / cpu_base, 2) if cpu_base else None}


def bench_size(n: int, work: Path, runs: int, validate_runs: int, formatted: bool) -> dict[str, object]:
    kb_root = generate(n, work / f"kb-{n}")
    cache = work / f"cache-{n}"
    env = {**os.environ, "KB_CACHE_DIR": str(cache)}
    env.pop("KB_NO_CACHE", None)
    env.pop("KB_RECORDS", None)
    kb = _kb()
    q = [*kb, "query", "--kb", str(kb_root), *QUERY]

    def clear() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    out: dict[str, object] = {"records": n, "files": sum(1 for _ in kb_root.rglob("*.yaml")),
                              "bytes": sum(p.stat().st_size for p in kb_root.rglob("*.yaml"))}
    out["cold_query"] = measure(q, env, min(runs, 5), before=clear)  # seconds each at 10,000 records
    _time(q, env)  # write the caches
    out["warm_query"] = measure(q, env, runs)
    seen = iter(range(10**6))
    out["warm_new_query"] = measure(q, env, runs, vary=lambda i: [*kb, "query", "--kb", str(kb_root), "--gpu",
                                                                  "h100", "--ctx", str(4096 + next(seen)), "--kv",
                                                                  "fp8"])
    out["validate"] = measure([*kb, "validate", "--kb", str(kb_root)], env, validate_runs, before=clear)
    out["validate_warm"] = measure([*kb, "validate", "--kb", str(kb_root)], env, validate_runs)
    if formatted:  # every record in canonical form, so KB601 formats every file (no verdicts cached)
        fmt_root = generate(n, work / f"kb-{n}-fmt", records=formatted_templates(work))
        out["validate_fmt"] = measure([*kb, "validate", "--kb", str(fmt_root)], env, validate_runs, before=clear)
    return out


def fit_exponent(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(time) on log(records)."""
    if len(points) < 2:
        return None
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def table(results: list[dict[str, object]]) -> str:
    rows = [f"{'records':>8}  {'measure':<15}{'median s':>10}{'min s':>9}{'max s':>9}{'x bare':>9}"
            f"{'cpu s':>9}{'cpu x bare':>12}{'runs':>6}"]
    for r in results:
        for key in ("warm_query", "warm_new_query", "cold_query", "validate", "validate_warm", "validate_fmt"):
            if key not in r:
                continue
            m = r[key]
            assert isinstance(m, dict)
            cr = f"{m['cpu_ratio']:.1f}" if m["cpu_ratio"] is not None else "-"
            rows.append(f"{r['records']:>8}  {key.replace('_', ' '):<15}{m['median_s']:>10.3f}{m['min_s']:>9.3f}"
                        f"{m['max_s']:>9.3f}{m['ratio']:>9.1f}{m['cpu_s']:>9.3f}{cr:>12}{m['runs']:>6}")
    bare = [r["warm_query"] for r in results]
    rows.append("bare interpreter (python -c pass), median wall s: "
                + ", ".join(f"{m['bare_s']:.3f}" for m in bare if isinstance(m, dict)))
    return "\n".join(rows)


def shipped_cold_query(work: Path, runs: int) -> dict[str, float]:
    """`kb query` on the shipped records with every cache removed first."""
    cache = work / "cache-shipped"
    env = {**os.environ, "KB_CACHE_DIR": str(cache)}
    env.pop("KB_NO_CACHE", None)
    env.pop("KB_RECORDS", None)
    q = [*_kb(), "query", "--kb", str(CHECKOUT / "records"), *QUERY]
    return measure(q, env, runs, before=lambda: shutil.rmtree(cache, ignore_errors=True))


def targets(results: list[dict[str, Any]], shipped: dict[str, float] | None, slope: float | None) \
        -> list[dict[str, Any]]:
    """Each target of issue #8 with the measured figure and whether it is met."""
    out: list[dict[str, Any]] = []
    for r in results:
        n = r["records"]
        for key, label in (("warm_query", "warm query, same question"), ("warm_new_query", "warm query, new question")):
            m = r[key]
            out.append({"what": f"{label}, {n:,} records", "got": f"{m['ratio']:.2f}x bare ({m['median_s']:.3f} s)",
                        "target": "<= 6x bare (stretch 4x)", "met": m["ratio"] <= 6})
        if n == 10000:
            v = r["validate"]
            out.append({"what": "kb validate, 10,000 records, cold", "got": f"{v['median_s']:.1f} s",
                        "target": "<= 20 s", "met": v["median_s"] <= 20})
    if shipped is not None:
        out.append({"what": "cold query, shipped KB", "got": f"{shipped['median_s']:.2f} s", "target": "<= 2 s",
                    "met": shipped["median_s"] <= 2})
    if slope is not None:
        out.append({"what": "validation growth", "got": f"records^{slope:.2f}", "target": "no worse than linear",
                    "met": slope <= 1.05})
    return out


def compile_bytecode() -> str:
    """Byte-compile the kbtool package that `kb` runs, as `pip install` does for a wheel.

    Without it, a process started with PYTHONDONTWRITEBYTECODE=1 (set on some machines and CI images) compiles
    every kbtool module from source on every run, and the benchmark would time the compiler."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("kbtool")
    folder = os.path.dirname(spec.origin) if spec and spec.origin else str(CHECKOUT / "kbtool")
    ok = compileall.compile_dir(folder, quiet=1)
    return f"{folder} ({'compiled' if ok else 'some modules failed to compile'})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 records, one run each (CI: crashes only)")
    ap.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    ap.add_argument("--runs", type=int, default=15, help="runs per query figure (median reported)")
    ap.add_argument("--validate-runs", type=int, default=3)
    ap.add_argument("--json", type=Path, default=CHECKOUT / "benchmarks" / "results.json", help="where to write")
    ap.add_argument("--keep", type=Path, default=None, help="generate the KBs here and keep them")
    ap.add_argument("--formatted", action="store_true",
                    help="also time `validate fmt`: KBs whose records were all put in canonical form by kb fmt")
    args = ap.parse_args(argv)
    sizes, runs, vruns = ([200], 1, 1) if args.quick else (args.sizes, args.runs, args.validate_runs)
    compiled = compile_bytecode()
    work = args.keep or Path(tempfile.mkdtemp(prefix="kb-bench-"))
    results = []
    try:
        for n in sizes:
            print(f"bench: {n} records ...", file=sys.stderr, flush=True)
            results.append(bench_size(n, work, runs, vruns, args.formatted and not args.quick))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    pts = [(int(r["records"]), float(r["validate"]["median_s"])) for r in results]  # type: ignore[index]
    slope = fit_exponent(pts)
    fpts = [(int(r["records"]), float(r["validate_fmt"]["median_s"])) for r in results  # type: ignore[index]
            if "validate_fmt" in r]
    fslope = fit_exponent(fpts)
    report = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform(), "loadavg_at_end": os.getloadavg(),
                          "kb": " ".join(_kb()), "bytecode": compiled},
              "quick": args.quick, "results": results, "validate_exponent": slope,
              "validate_fmt_exponent": fslope}
    shipped = None
    if not args.quick:
        print("bench: shipped KB, cold query ...", file=sys.stderr, flush=True)
        shipped = shipped_cold_query(work, runs=5)
        report["shipped_cold_query"] = shipped
    print(table(results))
    if slope is not None:
        print(f"validate time ~ records^{slope:.2f} (least squares over {len(pts)} sizes)")
    if fslope is not None:
        print(f"validate fmt time ~ records^{fslope:.2f} (least squares over {len(fpts)} sizes)")
    verdicts = targets(results, shipped, slope)
    report["targets"] = verdicts
    print("targets (issue #8):")
    for t in verdicts:
        print(f"  {'met   ' if t['met'] else 'MISSED'}  {t['what']}: {t['got']} (target {t['target']})")
    if not args.quick:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
