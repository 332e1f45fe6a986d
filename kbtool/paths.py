"""Where the records and schemas live: --kb PATH, $KB_RECORDS, the checkout, or the installed package data."""

from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent
_CHECKOUT = _PKG.parent


def records_dir(override: str | Path | None = None) -> Path:
    if override:
        return Path(override)
    env = os.environ.get("KB_RECORDS")
    if env:
        return Path(env)
    if (_CHECKOUT / "records").is_dir() and (_CHECKOUT / "pyproject.toml").is_file():
        return _CHECKOUT / "records"
    return _PKG / "_data" / "records"


def schema_dir() -> Path:
    if (_CHECKOUT / "schema").is_dir() and (_CHECKOUT / "pyproject.toml").is_file():
        return _CHECKOUT / "schema"
    return _PKG / "_data" / "schema"


def display(path: Path, root: Path | None = None) -> str:
    """A short path for messages: relative to the records' parent or the cwd where possible."""
    for base in (root.parent if root else None, Path.cwd()):
        if base is None:
            continue
        try:
            return str(path.resolve().relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path)
