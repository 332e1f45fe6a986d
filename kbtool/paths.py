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


_SYSTEM = ("/proc", "/sys", "/dev")  # kernel file systems: endless, unreadable or devices, never records
KIND_FOLDERS = frozenset({  # kbtool.model.FOLDERS' values (tests/test_paths.py holds them equal), without pydantic
    "architectures", "accelerators", "hardware-parameters", "kernels", "engine-backends", "engine-priorities",
    "claims", "models", "evidence", "measurements", "topics", "engine-releases"})


def _looks_like_records(real: str) -> bool:
    """Whether a folder's top level looks like a records tree: a kind folder, or only YAML files (a flat folder of
    records), or nothing at all (a new tree). A folder of something else (`--kb /tmp`, a home folder) is refused
    before a walk that could take minutes."""
    try:
        with os.scandir(real) as it:
            entries = [(e.name, e.is_dir()) for e in it if not e.name.startswith(".")]
    except OSError:
        return True  # unreadable: the walk reports it with its path
    if any(is_dir and name in KIND_FOLDERS for name, is_dir in entries):
        return True
    return not any(is_dir for _, is_dir in entries)


def root_problem(root: str) -> tuple[str, str] | None:
    """Why `root` cannot be a records tree, as (message, fix); None when it can be walked. The file system root
    and the kernel's folders are refused before any walk (`KB_RECORDS=/` read the whole disk)."""
    fix = "pass --kb PATH or set KB_RECORDS to a records folder"
    if not os.path.isdir(root):
        return f"records tree not found: {root}", fix
    real = os.path.realpath(root)
    if real == os.path.dirname(real):
        return f"{root} is the file system root, not a records tree", fix
    if any(real == s or real.startswith(s + "/") for s in _SYSTEM):
        return f"{root} is a system folder ({real}), not a records tree", fix
    if not _looks_like_records(real):
        return (f"{root} is not a records tree: its top level has folders but none of the kind folders (claims/, "
                f"models/, ...)"), fix
    return None


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
