"""Typed errors. The library raises these; cli.py maps them to exit codes."""

from __future__ import annotations


class KbError(RuntimeError):
    """Base of every error kb reports to the user. `exit_code` is what the CLI exits with."""

    exit_code = 2

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix

    def __str__(self) -> str:
        msg = super().__str__()
        return f"{msg}\n  fix: {self.fix}" if self.fix else msg


class UsageError(KbError):
    """Bad command-line input."""


class NotFoundError(UsageError):
    """A name that matches no record."""


class InvalidRecordError(KbError):
    """Records that do not load or validate."""

    exit_code = 1


class WriteError(KbError):
    """A record could not be written (read-only tree, lock held, ...)."""


class ProbeError(KbError):
    """A probe could not be set up or run."""
