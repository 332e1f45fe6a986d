"""The `kb bench` subcommands as plain library functions returning data (cli.py renders them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbtool.bench.records import gpus
from kbtool.errors import NotFoundError
from kbtool.measure.stats import DEFAULT_SEED, THRESHOLD, Separation, transfer, winners
from kbtool.measure.table import bench_records, table

if TYPE_CHECKING:
    from kbtool.bench.runner import Progress
    from kbtool.kb import KB


def _sep_json(s: Separation) -> dict[str, Any]:
    return {
        "config": s.key,
        "verdict": s.verdict,
        "fastest": s.winner,
        "winner": s.winner if s.separated else None,
        "ratio": None if s.ratio is None else round(s.ratio, 4),
        "lower_bound": None if s.lower is None else round(s.lower, 4),
        "ranking": [{"backend": r.backend, "median_us": round(r.median, 3), "samples": r.samples,
                     "measurement": r.ref} for r in s.ranking],
        "cannot_run": s.cannot_run,
    }


def _gpu(kb: KB, name: str) -> str:
    acc = kb.resolve(name, "accelerator").id
    if acc not in gpus(kb):
        have = ", ".join(gpus(kb)) or "none"
        raise NotFoundError(f"no bench measurements for {acc} (GPUs with measurements: {have})",
                            fix="run `kb bench run` on that GPU and commit its records")
    return acc


def winners_report(kb: KB, gpu: str | None = None, *, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Per GPU and phase: the separation verdict of every configuration and the share with a clear winner."""
    chosen = [_gpu(kb, gpu)] if gpu else gpus(kb)
    out: dict[str, Any] = {"seed": seed, "threshold": THRESHOLD, "gpus": []}
    for acc in chosen:
        recs = bench_records(kb, acc)
        entry: dict[str, Any] = {"gpu": acc, "phases": {}}
        for phase in ("prefill", "decode"):
            tab, _ = table(recs, phase)
            if not tab:
                continue
            summary = winners(tab, seed=seed)
            entry["phases"][phase] = {
                "configs": len(summary.results),
                "comparable": len(summary.comparable),
                "separated": len(summary.separated),
                "share": None if summary.share is None else round(summary.share, 4),
                "results": [_sep_json(s) for s in summary.results],
            }
        out["gpus"].append(entry)
    return out


def transfer_report(kb: KB, source: str, target: str, *, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    src, dst = _gpu(kb, source), _gpu(kb, target)
    out: dict[str, Any] = {"from": src, "to": dst, "seed": seed, "phases": {}}
    for phase in ("prefill", "decode"):
        a, _ = table(bench_records(kb, src), phase)
        b, _ = table(bench_records(kb, dst), phase)
        t = transfer(a, b, seed=seed)
        if not t.shared:
            continue
        out["phases"][phase] = {
            "shared_configs": t.shared,
            "winner_changes_all": t.changes_all,
            "compared_all": t.compared_all,
            "winner_changes_separated": t.changes_separated,
            "compared_separated": t.compared_separated,
            "cost_median": None if t.median_cost is None else round(t.median_cost, 4),
            "cost_p95": None if t.p95_cost is None else round(t.p95_cost, 4),
            "costs": [{"config": k, "cost": round(c, 4)} for k, c in t.costs],
            "cannot_run": [{"config": k, "pick": b} for k, b in t.cannot_run],
        }
    return out


def run_command(*, quick: bool, out: Path | None, records_root: Path, backends: list[str] | None = None,
                repeats: int = 3, budget_s: float = 540.0, seed: int = DEFAULT_SEED, plots: bool = True,
                progress: Progress | None = None) -> dict[str, Any]:
    """Run the grid here and write its measurement record, with its PNGs under docs/figures/ of the repository
    that holds the records tree. Raises NoGpuError without a GPU."""
    from kbtool.bench import records
    from kbtool.bench.runner import run_bench
    from kbtool.measure import grid as grids

    g = grids.quick() if quick else grids.full()
    result = run_bench(g, backends=backends, repeats=repeats, budget_s=budget_s, seed=seed, progress=progress)
    folder = out or records_root / "measurements"
    record = records.build(result)
    repo = records_root.resolve().parent
    figures = repo / "docs" / "figures"
    pngs: list[str] = []
    plot_error = None
    if plots:
        try:
            from kbtool.bench.plots import draw
            from kbtool.measure.table import cases

            figures.mkdir(parents=True, exist_ok=True)
            pngs = [str(p) for p in draw(cases(record), figures, record.id)]
        except ImportError as exc:
            plot_error = f"plots skipped: {exc}"
    record.artifacts = [Path(p).resolve().relative_to(repo).as_posix() for p in pngs]
    path = records.write(record, folder)
    counts: dict[str, int] = {}
    for a in result.attempts:
        counts[a.outcome] = counts.get(a.outcome, 0) + 1
    return {"gpu": result.environment.get("gpu"), "accelerator": result.environment.get("accelerator"),
            "grid": g.name, "record": str(path), "cases": len(record.rows), "folder": str(folder), "outcomes": counts,
            "copy_bandwidth_gbs": result.copy_bandwidth_gbs, "stopped_early": result.stopped_early,
            "plots": pngs, "plot_error": plot_error}
