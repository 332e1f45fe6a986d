"""The query image's cache file: one per records tree, fresh while no record, schema or kbtool source changes.

The file is `kb-<tag of the tree's real path>.image` in $KB_CACHE_DIR, else $XDG_CACHE_HOME/kb, else
~/.cache/kb (KB_CACHE_DIR set empty, or KB_NO_CACHE=1, turns it off). It holds MAGIC, a seal of the rest (`seal`),
a marshalled header and the payload (the marshalled image, kbtool/solve/image.py). The header keeps the tree's
listing (every file under the records tree and the schema folder with size and mtime_ns) and the code key
(kbtool's sources, the Python version, the installed packages); `read` hands the payload out only when both
still match what this process sees now, byte for byte. A truncated, corrupted, foreign or stale file reads as
absent and is rebuilt by the caller. This module uses plain string paths and marshal only: `kb query` reads
it before anything heavy is imported.

Every cache file kb writes (this one, the doc cache, the verdict cache) is sealed: `seal` prefixes a keyed
BLAKE2b digest of kb's version and the body, keyed by a random secret kept in the cache folder (`secret`, 0600,
made on the first write). A file whose seal does not match (corrupted, rewritten by hand or by another program,
written by another kb version, or copied from another cache folder) reads as absent and is rebuilt, so an edited
cache cannot change an answer. Every cache file is read through kbtool.store.untrusted.read_cache (regular files
this user owns, within a size limit).
"""

from __future__ import annotations

import marshal
import os
import sys

from kbtool import __version__
from kbtool.paths import schema_root
from kbtool.store.untrusted import read_cache

VERSION = 4
MAGIC = b"KB-IMAGE\n"
SEAL = 32  # bytes of the digest before a sealed body
SECRET = "secret"
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


def tag(path: str) -> str:
    """16 hex digits naming a cache file after the real path it is of (a records tree, a data file): the same
    path, the same name. blake2b, whose C module the seal loads anyway (zlib would cost the warm query its own)."""
    from _blake2 import blake2b

    return blake2b(os.path.realpath(path).encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


def image_path(root: str) -> str | None:
    base = cache_dir()
    return None if base is None else os.path.join(base, f"kb-{tag(root)}.image")


MAX_FOLDERS = 5_000  # kbtool.store.records.MAX_FOLDERS: the listing stops where the records walk stops


def _walk(top: str, out: list[tuple[str, int, int]]) -> None:
    """Every file under `top` as (path, size, mtime_ns), folder by folder (the same order for the same tree);
    __pycache__ skipped. A list of folders to read, not recursion: a tree 1,200 folders deep is listed like any
    other. One stat per file is what the listing costs (each file's size and mtime: an edit in place changes no
    folder); the loop around it is kept lean, as it runs on every warm query."""
    pending = [top]
    folders = 0
    while pending:
        try:
            it = os.scandir(pending.pop())
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        folders += 1
                        if folders > MAX_FOLDERS:  # no records tree (`--kb /tmp`): the loader's walk stops there too
                            return
                        if e.name != "__pycache__":
                            pending.append(e.path)
                        continue
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


def _digest(purpose: bytes, body: bytes, key: bytes) -> bytes:
    try:
        from _blake2 import blake2b  # the C module alone: hashlib would cost the warm query its import
    except ImportError:  # pragma: no cover
        from hashlib import blake2b
    h = blake2b(digest_size=SEAL, key=key, person=purpose[:16])
    h.update(f"kb {__version__} {VERSION}\n".encode())
    h.update(body)
    return h.digest()


def _secret(base: str, *, create: bool) -> bytes | None:
    """The cache folder's sealing key; with `create`, a new one replaces a missing or unusable one (which makes
    every file sealed with the old one read as absent)."""
    path = os.path.join(base, SECRET)
    key = read_cache(path, "secret")
    if key is not None and len(key) == 32 and hasattr(os, "getuid"):
        try:
            if os.stat(path).st_mode & 0o077:
                key = None  # readable by others: anyone could seal
        except OSError:
            key = None
    if key is not None and len(key) == 32:
        return key
    if not create:
        return None
    key = os.urandom(32)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        try:  # noqa: SIM105
            os.unlink(tmp)
        except OSError:
            pass
        return None
    return key


def make_room(path: str) -> None:
    """Remove what stands at one of kb's own cache paths when it is not a regular file (a FIFO, a link to
    /dev/zero): the writers refuse to replace such a thing (kbtool.store.writer.atomic_write), and kb rebuilds its
    own caches. A folder is left alone (the write then fails and the cache stays off)."""
    import stat

    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        try:  # noqa: SIM105
            os.unlink(path)
        except OSError:
            pass


def seal(path: str, purpose: bytes, body: bytes, base: str | None = None) -> bytes | None:
    """`body` with its seal in front, for the cache file `path` (in the cache folder `base`, by default its own
    folder); None when no key can be kept (no cache)."""
    key = _secret(base or os.path.dirname(path), create=True)
    return None if key is None else _digest(purpose, body, key) + body


def unseal(path: str, purpose: bytes, raw: bytes, base: str | None = None) -> bytes | None:
    """The body of a sealed cache file's bytes `raw`, or None when its seal does not match."""
    key = _secret(base or os.path.dirname(path), create=False)
    if key is None or len(raw) < SEAL:
        return None
    body = raw[SEAL:]
    return body if raw[:SEAL] == _digest(purpose, body, key) else None  # local files: no timing oracle to guard


def read(root: str) -> bytes | None:
    """The cached image payload of `root` when it is intact and still fresh; None otherwise."""
    path = image_path(root)
    if path is None:
        return None
    raw = read_cache(path, "cache-image")
    if raw is None or not raw.startswith(MAGIC):
        return None
    body = unseal(path, MAGIC, raw[len(MAGIC):])
    if body is None:
        return None
    try:
        header, payload = marshal.loads(body)
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
    sealed = seal(path, MAGIC, body)
    return sealed is not None and store(path, MAGIC + sealed)


def store(path: str, data: bytes) -> bool:
    """Write the cache file `path` whole (its folder made, under its lock, whatever non-file stood there removed);
    False where it cannot be written (a cache that cannot be written only costs time)."""
    from pathlib import Path

    from kbtool.errors import WriteError
    from kbtool.store.writer import atomic_write, file_lock

    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with file_lock(Path(path), timeout=1.0):
            make_room(path)
            atomic_write(Path(path), data)
    except (OSError, WriteError):
        return False
    return True
