"""The `kb` entry point: `kb query ...` runs kbtool/query_cli.py directly, without importing typer, pydantic
or rich (a warm query reads only the cached query image); every other command runs the typer app."""

from __future__ import annotations

import os
import sys


def survive_encoding() -> None:
    """Output that the terminal's encoding cannot hold (`PYTHONIOENCODING=ascii`, a C locale) is written as
    backslash escapes (`\u2014`) instead of ending the command in UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        enc = getattr(stream, "encoding", None)
        reconfigure = getattr(stream, "reconfigure", None)
        if not enc or reconfigure is None:
            continue
        try:
            "\u2014\u00d7\u2264".encode(enc)
        except (UnicodeEncodeError, LookupError):
            reconfigure(errors="backslashreplace")


def main() -> None:
    survive_encoding()
    argv = sys.argv[1:]
    try:
        if argv[:1] == ["query"]:
            from kbtool.query_cli import main as query
        else:
            from kbtool.cli import main as cli_main
    except Exception as e:  # a half-replaced install (`pip install -e` running): one line, not chained tracebacks
        if os.environ.get("KB_DEBUG"):
            raise
        sys.stderr.write(f"kb: cannot start: {type(e).__name__}: {repr(str(e))[1:-1]} (is kb being reinstalled? "
                         "run it again when pip is done)\n")
        sys.exit(3)
    if argv[:1] == ["query"]:
        sys.exit(query(argv[1:]))
    cli_main()
