"""Benchmark what people run: `kb query` warm in a terminal (a pty), warm piped and cold, and `kb validate`, on
the shipped KB and on a synthetic KB of 10,000 records grown the way the KB grows.

`kb validate` is timed three ways: "validate empty" with the cache folder emptied (every file parsed, every
evidence record judged again: what a fresh clone pays once), "validate cold" a new process after a run left the
caches (kbtool.store.doc_cache, kbtool.probe.verdict_cache), and "validate edit" after one claim file was edited
(its name: the record's content changes, what a judge reads of it does not). The shipped KB is timed on a copy.

Not a test. It times whole `kb` processes (the console script, as a user types it) and reports medians, each
also as a multiple of `python -c pass` timed in the same run, on the same machine, at the same load (the warm
figures against pass runs interleaved with their own, run for run; the others against the pass timed first):

    python benchmarks/bench.py            # shipped KB and 10,000 records; table + benchmarks/results.json
    python benchmarks/bench.py --quick    # shipped KB only, few runs: catches crashes, judges little

The terminal figure runs `kb` with stdin, stdout and stderr on a fresh pty (os.openpty, no `script` process in
between), reads everything it prints and waits for it: the ANSI path a person at a terminal gets.

The synthetic KB starts from the shipped records and adds what new work adds, in proportion: kernel variants
(new releases and paths of each shipped kernel) with copies of their template's claims, new models, many more
probe runs (evidence records) and bench runs and tables (measurement records), each copy with all of its
template's cases (tens to hundreds).
Copies get new ids, drop aliases (they must stay unique) and cite no evidence. It is synthetic timing input in
a temporary folder: nothing of it is a record of the KB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parent.parent
QUERY = ["query", "--gpu", "h100", "--ctx", "128k", "--kv", "fp8"]
ENGINE = ["query", "--gpu", "h100", "--vllm-args", "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 "
          "--max-model-len 32k --kv-cache-dtype fp8 --enable-prefix-caching"]  # README's serve-line example
KB = str(Path(sys.executable).with_name("kb"))
SOLVER = CHECKOUT / "kbtool" / "solve" / "decision.py"  # "validate solver edit": one line added to a solver module
TARGETS = {("shipped", "warm pty"): 3.0, ("shipped", "warm piped"): 3.0, ("shipped", "engine pty"): 5.0,
           ("shipped", "engine piped"): 5.0, ("10k", "warm pty"): 8.0}
VALIDATE_S = {("shipped", "validate empty"): 3.0, ("shipped", "validate cold"): 3.0, ("shipped", "validate edit"): 1.0,
              ("shipped", "validate solver edit"): 1.0, ("10k", "validate cold"): 20.0}


# ---- the synthetic KB ---------------------------------------------------------------------------


def _rid(text: str) -> str:
    m = re.search(r"^id: *['\"]?([^'\"\s]+)", text, re.M)
    assert m, text[:200]
    return m.group(1)


def _copy(text: str, old: str, new: str) -> str:
    text = re.sub(r"^id: *['\"]?" + re.escape(old) + r"['\"]?$", f"id: {new}", text, count=1, flags=re.M)
    text = re.sub(r"^aliases:.*\n(?:[ ]*- .*\n)*", "", text, flags=re.M)  # aliases stay unique
    m = re.search(r"^verification:.*\n((?:[ -].*\n|\n)*)", text, re.M)
    if m and "evidence" in m.group(0):
        text = text[: m.start()] + "verification: {status: unverified}\n" + text[m.end():]
    return text


def synthesize(dest: Path, total: int) -> dict[str, int]:
    """A records tree of `total` records under `dest`, grown from the shipped one; its count per folder."""
    shutil.copytree(CHECKOUT / "records", dest)
    have = {d.name: sorted(d.glob("*.yaml")) for d in dest.iterdir() if d.is_dir()}
    extra = total - sum(len(v) for v in have.values())
    share = {"kernels": 0.04, "models": 0.20, "evidence": 0.12, "measurements": 0.03}  # the rest: claims
    kernels = [(p, p.read_text()) for p in have["kernels"]]
    claims = [(p, p.read_text()) for p in have["claims"]]
    about: dict[str, list[str]] = {}
    for _, t in claims:
        m = re.search(r"^subject: *(\S+)", t, re.M)
        if m:
            about.setdefault(m.group(1), []).append(t)
    made = {k: 0 for k in (*share, "claims")}

    def write(folder: str, text: str) -> None:
        (dest / folder / f"{_rid(text)}.yaml").write_text(text)
        made[folder] += 1

    i = 0
    while made["kernels"] < share["kernels"] * extra:  # kernel variants, each with its template's claims
        path, text = kernels[i % len(kernels)]
        old, new = _rid(text), f"{_rid(text)}-v{i // len(kernels) + 2}"
        write("kernels", _copy(text, old, new))
        for c in about.get(old, []):
            cid = _rid(c)
            write("claims", re.sub(r"^subject: *\S+", f"subject: {new}", _copy(c, cid, f"{cid}-{new}"),
                                   count=1, flags=re.M))
        i += 1
    for kind, n in (("models", share["models"]), ("evidence", share["evidence"]),
                    ("measurements", share["measurements"])):
        templates = [p.read_text() for p in have[kind]]
        i = 0
        while made[kind] < n * extra:
            text = templates[i % len(templates)]
            copy = _copy(text, _rid(text), f"{_rid(text)}-r{i // len(templates) + 2}")
            write(kind, copy)
            i += 1
    i = 0
    while sum(len(v) for v in have.values()) + sum(made.values()) < total:  # more claims on shipped kernels
        text = claims[i % len(claims)][1]
        write("claims", _copy(text, _rid(text), f"{_rid(text)}-c{i // len(claims) + 2}"))
        i += 1
    return {d.name: len(list(d.glob("*.yaml"))) for d in sorted(dest.iterdir()) if d.is_dir()}


# ---- timing -------------------------------------------------------------------------------------


def _piped(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       check=False)
    return time.perf_counter() - t, r.returncode


def _pty(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    master, slave = os.openpty()
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    while True:
        try:
            if not os.read(master, 65536):
                break
        except OSError:  # EIO: the child closed its end
            break
    rc = p.wait()
    elapsed = time.perf_counter() - t
    os.close(master)
    return elapsed, rc


PASS = [sys.executable, "-c", "pass"]
PAIRED: dict[str, float] = {}
"""The warm figures' own `python -c pass`, by figure: timed run for run beside the figure (pass, kb, pass, kb, ...),
so that a machine whose speed drifts during the benchmark (other tenants, CPU frequency) moves both alike."""


def paired(name: str, runs: int, fn: Any, *args: Any) -> float:
    """median_of(runs, fn, *args), each run preceded by a `python -c pass` run; that pass's median kept in PAIRED."""
    env = args[1] if len(args) > 1 else os.environ
    bare, times = [], []
    for _ in range(runs):
        bare.append(_piped(PASS, env)[0])
        elapsed, rc = fn(*args)
        if rc not in (0, 1):
            raise SystemExit(f"{args[0]} exited {rc}")
        times.append(elapsed)
    PAIRED[name] = statistics.median(bare)
    return statistics.median(times)


def median_of(runs: int, fn: Any, *args: Any, before: Any = None) -> float:
    times = []
    for _ in range(runs):
        if before:
            before()
        elapsed, rc = fn(*args)
        if rc not in (0, 1):
            raise SystemExit(f"{args[0]} exited {rc}")
        times.append(elapsed)
    return statistics.median(times)


def bench_tree(name: str, root: Path, work: Path, runs: int, validate_runs: int) -> dict[str, float]:
    cache = work / f"cache-{name}"
    env = {**os.environ, "KB_CACHE_DIR": str(cache), "TERM": os.environ.get("TERM", "xterm"), "COLUMNS": "100"}
    env.pop("KB_NO_CACHE", None)
    cmd = [KB, *QUERY, "--kb", str(root)]

    def clear() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    out = {"cold query": median_of(max(1, validate_runs), _piped, cmd, env, before=clear)}
    _piped(cmd, env)  # the image is written
    out["warm piped"] = paired(f"{name} warm piped", runs, _piped, cmd, env)
    out["warm pty"] = paired(f"{name} warm pty", runs, _pty, cmd, env)
    engine = [KB, *ENGINE, "--kb", str(root)]
    _piped(engine, env)
    out["engine piped"] = paired(f"{name} engine piped", runs, _piped, engine, env)
    out["engine pty"] = paired(f"{name} engine pty", runs, _pty, engine, env)
    validate = [KB, "validate", "--kb", str(root)]
    out["validate empty"] = median_of(1, _piped, validate, env, before=clear)
    out["validate cold"] = median_of(validate_runs, _piped, validate, env)
    edit = _one_edit(root)
    out["validate edit"] = median_of(validate_runs, _piped, validate, env, before=edit)
    if name == "shipped":
        out["validate solver edit"] = _after_solver_edit(validate, env, validate_runs)
    return out


def _after_solver_edit(validate: list[str], env: dict[str, str], runs: int) -> float:
    """`kb validate` after a one-line edit of a solver module (a comment appended; restored afterwards): the verdict
    cache is keyed by each judge's own code, so an edit no judge imports judges nothing again."""
    text = SOLVER.read_bytes()
    count = [0]

    def edit() -> None:
        count[0] += 1
        SOLVER.write_bytes(text + f"# bench edit {count[0]}\n".encode())

    try:
        return median_of(runs, _piped, validate, env, before=edit)
    finally:
        SOLVER.write_bytes(text)


def _one_edit(root: Path) -> Any:
    """Each call edits one claim file (its name, one record's content; what a judge reads of it stays)."""
    path = sorted((root / "claims").glob("*.yaml"))[0]
    text = path.read_text(encoding="utf-8")
    count = [0]

    def edit() -> None:
        count[0] += 1
        path.write_text(re.sub(r"^name: *(.*)$", lambda m: f"name: {m.group(1)} (edit {count[0]})", text, count=1,
                               flags=re.M), encoding="utf-8")

    return edit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shipped KB only, 3 runs each")
    ap.add_argument("--runs", type=int, default=21, help="runs per warm figure (median)")
    ap.add_argument("--records", type=int, default=10_000, help="size of the synthetic KB")
    ap.add_argument("--out", type=Path, default=CHECKOUT / "benchmarks" / "results.json")
    args = ap.parse_args(argv)
    runs = 3 if args.quick else args.runs
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(CHECKOUT / "kbtool")], check=True)  # as pip does
    base_env = {**os.environ}
    bare = median_of(runs * 2, _piped, [sys.executable, "-c", "pass"], base_env)
    results: dict[str, dict[str, float]] = {}
    counts: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as tmp:
        work = Path(tmp)
        shipped = work / "records-shipped"  # a copy: the edit figure edits a file
        shutil.copytree(CHECKOUT / "records", shipped)
        results["shipped"] = bench_tree("shipped", shipped, work, runs, 1 if args.quick else 3)
        if not args.quick:
            root = work / "records-10k"
            counts = synthesize(root, args.records)
            os.sync()  # let the writeback of ~90 MB finish before anything is timed
            (work / "schema").symlink_to(CHECKOUT / "schema")
            results["10k"] = bench_tree("10k", root, work, runs, 1)
    bare_after = median_of(runs * 2, _piped, [sys.executable, "-c", "pass"], base_env)
    print(f"python -c pass: {bare * 1000:.1f} ms (before), {bare_after * 1000:.1f} ms (after); "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; {platform.python_version()}")
    if counts:
        print(f"synthetic KB: {sum(counts.values())} records ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    print(f"\n{'KB':<8} {'figure':<14} {'median':>10} {'x pass':>8}  target")
    for kb, figs in results.items():
        for fig, secs in figs.items():
            target = TARGETS.get((kb, fig))
            limit = VALIDATE_S.get((kb, fig))
            base = PAIRED.get(f"{kb} {fig}", bare)  # the warm figures: against their own paired pass runs
            verdict = (f"<= {target}x: {'met' if secs / base <= target else 'MISSED'}" if target else
                       f"<= {limit} s: {'met' if secs <= limit else 'MISSED'}" if limit else "")
            print(f"{kb:<8} {fig:<14} {secs * 1000:>8.0f} ms {secs / base:>7.1f}x  {verdict}")
    args.out.write_text(json.dumps({"python_pass_s": bare, "python_pass_after_s": bare_after,
                                    "python_pass_paired_s": PAIRED, "cpus": os.cpu_count(),
                                    "load": os.getloadavg()[0], "counts": counts,
                                    "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
