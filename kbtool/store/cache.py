"""The query image's cache file: one per records tree, fresh while no record, schema or kbtool source changes.

The file is `kb-<tag of the tree's real path>.image` in $KB_CACHE_DIR, else $XDG_CACHE_HOME/kb, else
~/.cache/kb (KB_CACHE_DIR set empty, or KB_NO_CACHE=1, turns it off). It holds MAGIC, a CRC-32 of the rest, a
marshalled header and the payload (the marshalled image, kbtool/solve/image.py). The header keeps the tree's
listing (every file under the records tree and the schema folder with size and mtime_ns) and the code key
(kbtool's sources, the Python version, the installed packages); `read` hands the payload out only when both
still match what this process sees now, byte for byte. A truncated, corrupted, foreign or stale file reads as
absent and is rebuilt by the caller. This module uses plain string paths and marshal only: `kb query` reads
it before anything heavy is imported.
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib

from kbtool.paths import schema_root

VERSION = 3
MAGIC = b"KB-IMAGE\n"
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cache_dir() -> str | None:
    """$KB_CACHE_DIR, else $XDG_CACHE_HOME/kb, else ~/.cache/kb; None when the cache is off."""
    if os.environ.get("KB_NO_CACHE"):
        return None
    env = os.environ.get("KB_CACHE_DIR")
    if env is not None:
        return env or None
    xdg = os.environ.get("XDG_CACHE_HOME")
    return os.path.join(xdg, "kb") if xdg else os.path.join(os.path.expanduser("~"), ".cache", "kb")


def image_path(root: str) -> str | None:
    base = cache_dir()
    if base is None:
        return None
    b = os.path.realpath(root).encode("utf-8", "surrogateescape")
    return os.path.join(base, f"kb-{zlib.crc32(b):08x}{zlib.adler32(b):08x}.image")


def _walk(top: str, out: list[tuple[str, int, int]]) -> None:
    """Every file under `top` as (path, size, mtime_ns), in directory order; __pycache__ skipped."""
    try:
        with os.scandir(top) as it:
            entries = list(it)
    except OSError:
        return
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            if e.name != "__pycache__":
                _walk(e.path, out)
            continue
        try:
            st = e.stat()  # follows a symlink: its target is what the reader sees
        except OSError:
            continue
        out.append((e.path, st.st_size, st.st_mtime_ns))


def tree_key(root: str) -> bytes:
    """The listing of the records tree and the schema folder (equal keys mean equal listings)."""
    out: list[tuple[str, int, int]] = []
    for top in (root, schema_root()):
        out.append((f"<{os.path.abspath(top)}>", 0, 0))
        _walk(top, out)
    return marshal.dumps(out)


def code_key() -> bytes:
    """kbtool's sources, the Python version, the installed packages' folders and the format version."""
    files: list[tuple[str, int, int]] = []
    _walk(_PKG, files)
    sites = []
    for p in sys.path:
        if p.endswith("-packages"):
            try:  # noqa: SIM105  (contextlib would cost the query an import)
                sites.append((p, os.stat(p).st_mtime_ns))  # changes when a package is installed or removed
            except OSError:
                pass
    return marshal.dumps((VERSION, sys.version, sites, sorted(f for f in files if f[0].endswith(".py"))))


def read(root: str) -> bytes | None:
    """The cached image payload of `root` when it is intact and still fresh; None otherwise."""
    path = image_path(root)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            if hasattr(os, "getuid") and os.fstat(f.fileno()).st_uid != os.getuid():
                return None  # not written by this user
            raw = f.read()
    except OSError:
        return None
    start = len(MAGIC) + 4
    if not raw.startswith(MAGIC) or len(raw) < start or zlib.crc32(raw[start:]) != int.from_bytes(
            raw[len(MAGIC):start], "little"):
        return None
    try:
        header, payload = marshal.loads(raw[start:])
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(header, dict) or not isinstance(payload, bytes):
        return None
    if header.get("root") != os.path.realpath(root) or header.get("code") != code_key():
        return None
    return payload if header.get("tree") == tree_key(root) else None


def write(root: str, tree: bytes, payload: bytes) -> bool:
    """Store the image of `root`, built when the tree had the listing `tree`; False when off or failed."""
    path = image_path(root)
    if path is None:
        return False
    body = marshal.dumps(({"root": os.path.realpath(root), "code": code_key(), "tree": tree}, payload))
    data = MAGIC + zlib.crc32(body).to_bytes(4, "little") + body
    from pathlib import Path

    from kbtool.errors import WriteError
    from kbtool.store.writer import atomic_write, file_lock

    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with file_lock(Path(path), timeout=1.0):
            atomic_write(Path(path), data)
    except (OSError, WriteError):
        return False
    return True
