"""Plain-text renderings of the `kb bench` reports (strings only; cli.py prints them)."""

from __future__ import annotations

from typing import Any


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def winners(report: dict[str, Any], verbose: bool = False) -> str:
    lines = [f"separation rule: second place >= {report['threshold']:.2f}x slower and bootstrap L95 > 1 "
             f"(seed {report['seed']})"]
    for g in report["gpus"]:
        for phase, p in g["phases"].items():
            lines.append(f"{g['gpu']} {phase}: {p['separated']} of {p['comparable']} configurations with >= 2 "
                         f"backends have a clear winner ({_pct(p['share'])}); {p['configs']} configurations")
            for r in p["results"]:
                if r["verdict"] == "separated":
                    what = f"winner {r['winner']} (R={r['ratio']:.3f}, L95={r['lower_bound']:.3f})"
                elif r["verdict"] == "no-clear-winner":
                    low = "n/a (< 2 samples)" if r["lower_bound"] is None else f"{r['lower_bound']:.3f}"
                    what = f"no clear winner (fastest {r['fastest']}, R={r['ratio']:.3f}, L95={low})"
                elif r["verdict"] == "single":
                    what = f"only {r['fastest']} ran"
                else:
                    what = "nothing ran"
                if verbose or r["verdict"] == "separated":
                    lines.append(f"  {r['config']}: {what}")
    return "\n".join(lines)


def transfer(report: dict[str, Any]) -> str:
    lines = [f"transfer {report['from']} -> {report['to']} (cost = target time of the source's pick / best "
             "target time)"]
    if not report["phases"]:
        lines.append("  no shared configurations")
    for phase, p in report["phases"].items():
        med = "n/a" if p["cost_median"] is None else f"{p['cost_median']:.3f}x"
        p95 = "n/a" if p["cost_p95"] is None else f"{p['cost_p95']:.3f}x"
        lines += [
            f"{phase}: {p['shared_configs']} shared configurations",
            f"  winner changes, all: {p['winner_changes_all']} of {p['compared_all']}",
            f"  winner changes, separated on both: {p['winner_changes_separated']} of {p['compared_separated']}",
            f"  transfer cost: median {med}, p95 {p95} over {len(p['costs'])} configurations",
            f"  source pick cannot run on target: {len(p['cannot_run'])}",
        ]
        lines += [f"    {c['config']}: {c['pick']}" for c in p["cannot_run"]]
    return "\n".join(lines)


def run(summary: dict[str, Any]) -> str:
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(summary["outcomes"].items()))
    copy = summary["copy_bandwidth_gbs"]
    lines = [
        f"{summary['gpu']} ({summary['accelerator'] or 'not in the KB'}), grid {summary['grid']}",
        f"copy bandwidth: {'n/a' if copy is None else f'{copy:.0f} GB/s (read + write)'}",
        f"attempts: {outcomes}",
        f"wrote {summary['record']} ({summary['cases']} cases)",
    ]
    lines += [f"plot: {p}" for p in summary["plots"]]
    if summary.get("plot_error"):
        lines.append(summary["plot_error"])
    if summary.get("stopped_early"):
        lines.append(f"stopped early: {summary['stopped_early']}")
    return "\n".join(lines)
