"""`kb schema export|check`: the JSON Schema files generated from the models."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from kbtool.cli.app import app, fail, print

if TYPE_CHECKING:
    pass


schema_app = typer.Typer(help="Export or check the JSON Schema files generated from the models.",
                         no_args_is_help=True)
app.add_typer(schema_app, name="schema")
# ---- schema -------------------------------------------------------------------------------------


@schema_app.command("export")
def schema_export() -> None:
    """Write schema/<kind>.schema.json from the models."""
    from kbtool.schema_io import export

    for p in export():
        print(f"wrote {p}")


@schema_app.command("check")
def schema_check() -> None:
    """Fail if the committed schema files differ from the models."""
    from kbtool.schema_io import drift

    stale = drift()
    if stale:
        fail(f"schema files differ from the models: {', '.join(stale)}", 1, "run `kb schema export`")
    print("schema files match the models")
