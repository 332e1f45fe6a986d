"""The typer app and what every command shares: parse, call the library, render, exit. Only kbtool/cli/ imports
typer.

Exit codes: 0 ok, 1 findings (or a "no" the user asked to fail on), 2 usage or input, 3 internal error.
"""

from __future__ import annotations

import builtins
import json
import os
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from kbtool import __version__

if TYPE_CHECKING:
    from kbtool.kb import KB

def print(*values: object, sep: str = " ", end: str = "\n", file: Any = None, flush: bool = False) -> None:
    """builtins.print with every value passed through kbtool.escape.escape (nothing raw to a terminal)."""
    from kbtool.escape import escape as visible

    builtins.print(*(visible(str(v)) for v in values), sep=sep, end=end, file=file, flush=flush)


app = typer.Typer(
    name="kb",
    help="Attention-kernel and accelerator capability records: validate, query, probe.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


class Format(StrEnum):
    text = "text"
    json = "json"


KbOpt = Annotated[
    Path | None,
    typer.Option("--kb", help="Records tree to use (default: $KB_RECORDS, the checkout, or the installed copy)."),
]

def _version(value: bool) -> None:
    if value:
        print(f"kb {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Read records afresh; skip the KB cache.")] = False,
) -> None:
    """Attention-kernel and accelerator capability records: validate, query, probe."""
    if no_cache:
        os.environ["KB_NO_CACHE"] = "1"


def _error(message: str, fix: str | None = None) -> None:
    """`error: MESSAGE` on stderr; user text is printed as text, never read as markup."""
    from rich.text import Text

    from kbtool.render.console import err

    err.print(Text.assemble(("error:", "red"), " ", message), highlight=False)
    if fix:
        err.print(Text(f"  fix: {fix}"), highlight=False)


def fail(message: str, code: int = 2, fix: str | None = None) -> NoReturn:
    _error(message, fix)
    raise typer.Exit(code)


def _records(kb: Path | None) -> Path:
    from kbtool.paths import records_dir, root_problem

    root = records_dir(kb)
    problem = root_problem(str(root))
    if problem is not None:
        fail(problem[0], 2, problem[1])
    return root



def _load_kb(kb: Path | None) -> KB:
    """The records that validate (kbtool.kb.load_kb); how many files were left out is said on stderr."""
    from kbtool.kb import load_kb

    base, left_out = load_kb(_records(kb))
    if left_out:
        from kbtool.render.console import err

        err.print(f"warning: {left_out} record(s) left out (run `kb validate`)", markup=False, highlight=False)
    return base




def _print_json(data: object) -> None:

    print(json.dumps(data, indent=2, default=str))


def _emit(data: Any, json_: bool, view: str) -> None:
    """A view's data as JSON, or as text through kbtool.render.views.<view>."""
    if json_:
        _print_json(data)
        return
    from kbtool.render import views as render
    from kbtool.render.console import out

    getattr(render, view)(out, data)
