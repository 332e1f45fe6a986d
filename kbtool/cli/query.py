"""`kb query` under typer: it hands its arguments to kbtool/query_cli.py, the one implementation."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from kbtool.cli.app import app

if TYPE_CHECKING:
    pass


# ---- query --------------------------------------------------------------------------------------


@app.command(add_help_option=False, context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                                      "help_option_names": []})
def query(ctx: typer.Context) -> None:
    """Answer a serving question: kernels, reasons, caveats, KV fit.

    Can this accelerator serve this context with this KV dtype (and model, engine, libraries)? The options are
    kbtool/query_cli.py's OPTIONS (`kb query --help`); this command hands its arguments to that module.
    """
    from kbtool.query_cli import main as run

    raise typer.Exit(run(list(ctx.args)))
