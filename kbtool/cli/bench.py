"""`kb bench run|winners|transfer`: timing grids on this GPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kbtool.cli.app import KbOpt, _load_kb, _records, app, print

if TYPE_CHECKING:
    pass


# ---- bench --------------------------------------------------------------------------------------

bench_app = typer.Typer(help="Time attention backends on this GPU; winners and transfer cost.",
                        no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@bench_app.command("run")
def bench_run(
    quick: Annotated[bool, typer.Option("--quick", help="The small grid (< 10 minutes on an H200).")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Folder for the run's record (default: the records "
                                             "tree's measurements/); PNGs go to docs/figures/.")] = None,
    backend: Annotated[list[str] | None, typer.Option("--backend", help="Only these backends (repeatable).")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Separate process launches per attempt.")] = 3,
    budget: Annotated[float, typer.Option("--budget-s", help="Stop starting new work after this many seconds.")]
    = 540.0,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Do not draw PNGs.")] = False,
    kb: KbOpt = None,
) -> None:
    """Run the prefill and decode grid on the local GPU and write its measurement record (one per run)."""
    from kbtool.bench.commands import run_command
    from kbtool.bench.runner import NoGpuError
    from kbtool.bench.text import run as render

    try:
        summary = run_command(quick=quick, out=out, records_root=_records(kb), backends=backend or None,
                              repeats=repeats, budget_s=budget, plots=not no_plots,
                              progress=lambda m: print(m, file=sys.stderr, flush=True))
    except NoGpuError as e:
        print(f"kb bench run: {e}")
        raise typer.Exit(0) from None
    print(render(summary))


@bench_app.command("winners")
def bench_winners(
    gpu: Annotated[str | None, typer.Option("--gpu", help="Accelerator id or alias (default: every GPU).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every configuration.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Apply the separation rule per configuration: separated winners and the clear-winner share."""

    from kbtool.bench.commands import winners_report
    from kbtool.bench.text import winners as render

    report = winners_report(_load_kb(kb), gpu, seed=seed)
    print(json.dumps(report, indent=2) if json_ else render(report, verbose))


@bench_app.command("transfer")
def bench_transfer(
    source: Annotated[str, typer.Option("--from", help="Source accelerator id or alias.")],
    target: Annotated[str, typer.Option("--to", help="Target accelerator id or alias.")],
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Winner changes and transfer cost of reusing the source GPU's pick on the target GPU."""

    from kbtool.bench.commands import transfer_report
    from kbtool.bench.text import transfer as render

    report = transfer_report(_load_kb(kb), source, target, seed=seed)
    print(json.dumps(report, indent=2) if json_ else render(report))
