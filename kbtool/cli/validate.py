"""`kb validate`: every record checked, findings grouped by check."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kbtool.cli.app import Format, KbOpt, _records, app

if TYPE_CHECKING:
    pass


# ---- validate -----------------------------------------------------------------------------------


@app.command()
def validate(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files or folders (default: the records tree).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help="text or json")] = Format.text,
    json_: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    list_checks: Annotated[bool, typer.Option("--list-checks", help="List every check and exit.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Fail on warnings too.")] = False,
    style: Annotated[bool, typer.Option("--style", help="Also report files not in `kb fmt`'s canonical form "
                                                        "(KB601, slower; `kb fmt --check` is the gate).")] = False,
    kb: KbOpt = None,
) -> None:
    """Check every record: YAML, schema, references and values.

    Findings are grouped by check, each located by file, line and path, with the fix.
    """
    from kbtool.render import findings as render

    if list_checks:
        render.list_checks()
        raise typer.Exit(0)
    from kbtool.validate import validate as run

    report = run(_records(kb), paths, style=style)
    if json_ or fmt is Format.json:
        render.as_json(report)
    else:
        render.text(report)
    raise typer.Exit(report.exit_code(strict))
