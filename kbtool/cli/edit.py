"""`kb fmt`, `kb new`, `kb model import`: the commands that write records."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kbtool.cli.app import KbOpt, _records, app, fail, print
from kbtool.errors import KbError
from kbtool.escape import escape

if TYPE_CHECKING:
    pass


# ---- fmt / new ----------------------------------------------------------------------------------


@app.command("fmt")
def fmt_cmd(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files or folders (default: the records tree).")] = None,
    check: Annotated[bool, typer.Option("--check", help="Change nothing; print a diff and exit 1 if any "
                                                        "file is not canonical.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Put records in canonical form: schema line, key order, quotes.

    Comments are kept. Evidence records are never touched (only `kb probe run` writes them).
    """

    from kbtool.fmt.run import format_paths

    report = format_paths(_records(kb), paths, check=check)
    if json_:
        print(json.dumps({"ok": report.exit_code == 0, "check": check,
                          "files": [{"file": r.name, "status": r.status, "message": r.message or None,
                                     "diff": r.diff or None} for r in report.results]}, indent=2))
        raise typer.Exit(report.exit_code)
    from kbtool.render.console import err

    for r in report.results:
        if r.status == "changed":
            sys.stdout.write(escape(r.diff)) if check else print(f"reformatted {r.name}")
        elif r.status == "error":
            err.print(f"error: {r.message}", markup=False, highlight=False)
    changed, ok = len(report.of("changed")), len(report.of("ok"))
    verb = "would reformat" if check else "reformatted"
    tail = "; run `kb fmt` to fix" if check and changed else ""
    err.print(f"{verb} {changed} file(s), {ok} already canonical, {len(report.of('skipped'))} skipped, "
              f"{len(report.of('error'))} error(s){tail}", markup=False, highlight=False)
    raise typer.Exit(report.exit_code)


@app.command()
def new(
    kind: Annotated[str, typer.Argument(metavar="KIND", help="Record kind, e.g. claim, kernel, accelerator.")],
    record_id: Annotated[str, typer.Argument(metavar="ID", help="The new record's id.")],
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the record instead of writing it.")] = False,
    kb: KbOpt = None,
) -> None:
    """Scaffold a new record with its required fields, commented."""
    from kbtool import scaffold

    root = _records(kb)
    try:
        if stdout:
            print(scaffold.scaffold(kind, record_id, scaffold.record_path(root, kind, record_id)), end="")
            raise typer.Exit(0)
        path = scaffold.create(root, kind, record_id)
    except KbError as e:
        fail(str(e.args[0]), e.exit_code, e.fix)
    print(f"wrote {path}; replace each TODO, then run `kb validate {path}`")


model_app = typer.Typer(help="Model records from Hugging Face configs.", no_args_is_help=True)
app.add_typer(model_app, name="model")


@model_app.command("import")
def model_import(
    config: Annotated[str, typer.Argument(metavar="PATH", help="A config.json (or the folder holding it).")],
    record_id: Annotated[str | None, typer.Option("--id", help="Record id (default: the folder's name).")] = None,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the record instead of writing it.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing record.")] = False,
    kb: KbOpt = None,
) -> None:
    """Write a model record from a Hugging Face config.json, citing the config (SOURCE.yaml beside it)."""
    from kbtool import modelimport

    root = _records(kb)
    if stdout:
        print(modelimport.record_text(config, record_id, root)[1], end="")
        raise typer.Exit(0)
    path = modelimport.import_model(config, record_id, root, overwrite=force)
    print(f"wrote {path}; run `kb validate {path}`")
