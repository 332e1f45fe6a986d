"""Where the records and schemas live: --kb PATH, $KB_RECORDS, the checkout, or the installed package data.

The lookups work on plain strings (os.path) so that the `kb query` path (kbtool/query_cli.py) can use
them without importing pathlib; `records_dir` and `schema_dir` wrap them in Paths for everything else.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # no typing at run time: the warm query path imports this module
if TYPE_CHECKING:
    from pathlib import Path

_PKG = os.path.dirname(os.path.realpath(__file__))
_CHECKOUT = os.path.dirname(_PKG)


def _in_checkout(name: str) -> str | None:
    d = os.path.join(_CHECKOUT, name)
    return d if os.path.isdir(d) and os.path.isfile(os.path.join(_CHECKOUT, "pyproject.toml")) else None


def records_root(override: str | None = None) -> str:
    """The records tree, as a string."""
    return override or os.environ.get("KB_RECORDS") or _in_checkout("records") or os.path.join(_PKG, "_data",
                                                                                                 "records")


def schema_root() -> str:
    """The schema folder, as a string."""
    return _in_checkout("schema") or os.path.join(_PKG, "_data", "schema")


def records_dir(override: str | Path | None = None) -> Path:
    from pathlib import Path

    return Path(records_root(str(override) if override else None))


def schema_dir() -> Path:
    from pathlib import Path

    return Path(schema_root())


def display(path: Path, root: Path | None = None) -> str:
    """A short path for messages: relative to the records' parent or the cwd where possible."""
    return Display(root)(path)


class Display:
    """`display` for the many files of one walk: the bases and each folder's real path are resolved once."""

    def __init__(self, root: Path | None = None) -> None:
        from pathlib import Path

        bases = [b for b in (root.parent if root else None, Path.cwd()) if b is not None]
        self.bases = [(os.path.abspath(b), str(b.resolve())) for b in bases]
        self._real: dict[str, str] = {}

    def __call__(self, path: Path) -> str:
        given = os.path.abspath(path)  # the path as found (a symlink names itself, not its target)
        parent, name = os.path.split(given)
        if parent not in self._real:
            self._real[parent] = os.path.realpath(parent)
        real = os.path.join(self._real[parent], name)
        for plain, resolved in self.bases:
            for here, there in ((given, plain), (real, resolved)):
                if here == there:
                    return "."
                prefix = there if there.endswith(os.sep) else there + os.sep
                if here.startswith(prefix):
                    return here[len(prefix):]
        return str(path)
