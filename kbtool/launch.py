"""The `kb` entry point: `kb query ...` runs kbtool/query_cli.py directly, without importing typer, pydantic
or rich (a warm query reads only the cached query image); every other command runs the typer app."""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["query"]:
        from kbtool.query_cli import main as query

        sys.exit(query(argv[1:]))
    from kbtool.cli import main as cli_main

    cli_main()
