"""The `kb` entry point: a `kb query` whose records tree has a fresh query image is answered by
kbtool/fastquery.py, before typer, pydantic, rich or the YAML reader are imported; everything else (and
every query the fast path declines) runs the full CLI in kbtool/cli.py.

The fast path renders into memory first, so when it fails unexpectedly nothing has been written yet and the
full CLI answers instead (or reports the error in its usual words). Once its answer is written and flushed
the process ends with os._exit: there is nothing left to clean up but memory.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["query"]:
        import gc

        gc.disable()  # a short run that frees nothing: the cycle collector would only walk the image, again and again
        answered = _fast(argv[1:])
        if answered is not None:
            out, err, rc = answered
            _write(err, sys.stderr)
            _write(out, sys.stdout)
            # Everything is written and flushed: skip the interpreter's teardown, which would spend
            # milliseconds freeing the image object by object.
            os._exit(rc)
        gc.enable()
    from kbtool.cli import main as cli_main

    cli_main()


def _fast(argv: list[str]) -> tuple[str, str, int] | None:
    if os.environ.get("KB_DEBUG_NO_FAST"):
        return None
    try:
        from kbtool.fastquery import run

        return run(argv)
    except Exception:  # a bug in the fast path must not cost the answer: the full CLI runs instead
        if os.environ.get("KB_DEBUG"):
            raise
        return None


def _write(text: str, stream: object) -> None:
    if not text:
        return
    try:
        stream.write(text)  # type: ignore[attr-defined]
        stream.flush()  # type: ignore[attr-defined]
    except BrokenPipeError:  # the reader went away (`kb query ... | head -1`): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
