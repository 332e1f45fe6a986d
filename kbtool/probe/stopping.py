"""Stopping a long probe command cleanly: SIGTERM (a scheduler's stop, `kill PID`) becomes an exception in the
main thread, as Ctrl-C (SIGINT) already is, so the code that started child processes ends them on the way out.

Without it Python dies on SIGTERM at once and the children it started in their own sessions (probe workers, a
sweep's `kb probe run`) keep running and write evidence against an environment being deleted (issue 46).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; raised in the main thread as Ctrl-C is (not an Exception, so that `except Exception` blocks
    do not swallow it; the CLI ends as on Ctrl-C)."""


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Terminated(f"stopped by signal {signum}")


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises Terminated in the main thread; outside the main thread (where no handler
    can be set) the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
