"""The kb command line: the typer app (app.py) and one module per group of commands, each parsing its options,
calling the library and rendering; nothing outside this package imports typer.

Exit codes: 0 ok, 1 findings (or a "no" the user asked to fail on), 2 usage or input, 3 internal error.
"""

from __future__ import annotations

import atexit
import functools
import gc
import os
import sys
from typing import Any

import typer

from kbtool.cli import bench, diff, edit, probe, query, schema, show, validate, views  # noqa: F401  (they register)
from kbtool.cli.app import _error, app, print
from kbtool.errors import KbError
from kbtool.escape import escape

__all__ = ["app", "main"]


# ---- entry point --------------------------------------------------------------------------------


def main() -> None:
    """Run the app; map errors to exit codes, never show a traceback for bad input."""
    # A run builds many long-lived objects (records, parsed documents). CPython's default thresholds make the
    # collector walk them again and again: collect less often, as mypy does (mypy/build.py, build():
    # gc.set_threshold(200 * 1000, 30, 30)). At exit the interpreter's last collections would walk them all once
    # more only to find nothing to free (a quarter of a warm `kb validate`): gc.freeze() at exit takes them out of
    # those collections (docs.python.org/3/library/gc.html#gc.freeze); they are still freed. Registered once per
    # process however often main() runs (tests call it in-process).
    gc.set_threshold(200_000, 30, 30)
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    _run()


@functools.cache
def _command() -> Any:
    """The click command typer builds from the app (every command's signature read): built once per process, as
    tests run main() many times in one; errors are mapped below, so typer's exception hook is not installed."""
    return typer.main.get_command(app)


def _run() -> None:
    try:
        rc = _command()(standalone_mode=False)  # click returns the code of a typer.Exit here
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except KbError as e:
        _error(str(e.args[0]) if e.args else "", e.fix)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # typer/click usage errors carry their own exit code
        code = getattr(e, "exit_code", None)
        show = getattr(e, "show", None)
        if isinstance(code, int) and callable(show):
            show()
            sys.exit(2 if code == 2 else code)
        if os.environ.get("KB_DEBUG"):
            raise
        print(f"kb: internal error: {type(e).__name__}: {escape(str(e))}\n  please report this (set KB_DEBUG=1 for the "
              "traceback)", file=sys.stderr)
        sys.exit(3)
