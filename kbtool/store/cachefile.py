"""The cache file format and the tree fingerprints, on the standard library's cheapest modules only.

`kb query` consults these before it decides whether to import anything else, so this module uses plain
string paths and `marshal`: no pathlib, typing, dataclasses, json, re or contextlib (each costs a noticeable
share of an interpreter start).

A cache file is: MAGIC, a fixed header (format version, header length, payload length, CRC-32 of header
and payload), a marshalled header dict, the payload. Anything else is treated as absent. The CRC catches
truncation and corruption; freshness is decided by exact keys (`stat_key`, `code_key` are the marshalled
listings themselves, compared byte for byte), never by a hash that could collide. hashlib (whose OpenSSL
binding costs milliseconds to load) is only imported for `content_key`, off the warm path.
"""

from __future__ import annotations

import marshal
import os
import struct
import sys
import zlib

FORMAT_VERSION = 2
MAGIC = b"KB-CACHE\n"
_HEAD = struct.Struct("<IIQI")
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cache_dir() -> str | None:
    """$KB_CACHE_DIR, else $XDG_CACHE_HOME/kb, else ~/.cache/kb; None when KB_CACHE_DIR is empty (off)."""
    env = os.environ.get("KB_CACHE_DIR")
    if env is not None:
        return env or None
    xdg = os.environ.get("XDG_CACHE_HOME")
    return os.path.join(xdg, "kb") if xdg else os.path.join(os.path.expanduser("~"), ".cache", "kb")


def walk(top: str, out: list[tuple[str, int, int]], ordered: bool = True) -> None:
    """Every file under `top` as (path, size, mtime_ns), sorted by name; __pycache__ folders skipped.

    `ordered=False` keeps directory order instead (no sorting: the stat key is taken on every query; the order
    only changes when a folder does, and a changed order merely reads as a changed listing)."""
    try:
        with os.scandir(top) as it:
            entries = sorted(it, key=lambda e: e.name) if ordered else list(it)
    except OSError:
        return
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            if e.name != "__pycache__":
                walk(e.path, out, ordered)
            continue
        try:
            st = e.stat()  # follows a symlink: its target is what the reader sees
        except OSError:
            continue
        out.append((e.path, st.st_size, st.st_mtime_ns))


def name_key(text: str) -> str:
    """A short file-name tag for `text` (not collision-proof: readers also check the header's `root`)."""
    b = text.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(b):08x}{zlib.adler32(b):08x}"


def stat_key(root: str, schema: str | None) -> bytes:
    """Every file under the records tree and the schema folder, with its size and mtime_ns (the listing itself:
    equal keys mean equal listings)."""
    out: list[tuple[str, int, int]] = []
    for top in (root, schema):
        if top is not None:
            out.append((f"<{os.path.abspath(top)}>", 0, 0))
            walk(top, out, ordered=False)
    return marshal.dumps(out)


def content_key(root: str, schema: str | None) -> str:
    """SHA-256 over every file's path (relative to its folder) and bytes."""
    import hashlib

    h = hashlib.sha256()
    for top in (root, schema):
        if top is None:
            continue
        files: list[tuple[str, int, int]] = []
        walk(top, files)
        h.update(f"<{os.path.basename(os.path.abspath(top))}>\0".encode())
        for path, _, _ in files:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                data = b"\xff<unreadable>"
            h.update(os.path.relpath(path, top).encode() + b"\0" + str(len(data)).encode() + b"\0")
            h.update(data)
    return h.hexdigest()


def code_key() -> bytes:
    """kbtool's sources, the Python version, the installed packages' folders and the format version."""
    files: list[tuple[str, int, int]] = []
    walk(_PKG, files)
    sites = []
    for p in sys.path:
        if p.endswith("-packages"):
            try:  # noqa: SIM105  (contextlib costs the warm query path an import)
                sites.append((p, os.stat(p).st_mtime_ns))  # changes when a package is installed or removed
            except OSError:
                pass
    return marshal.dumps((FORMAT_VERSION, sys.version, sites, [f for f in files if f[0].endswith(".py")]))


def encode(header: dict[str, object], payload: bytes) -> bytes:
    head = marshal.dumps(header)
    check = zlib.crc32(payload, zlib.crc32(head))
    return MAGIC + _HEAD.pack(FORMAT_VERSION, len(head), len(payload), check) + head + payload


def decode(raw: bytes) -> tuple[dict[str, object], bytes] | None:
    """(header, payload) of a whole, intact file of this format version; None for anything else."""
    got = decode_view(raw)
    return None if got is None else (got[0], bytes(got[1]))


def decode_view(raw: bytes) -> tuple[dict[str, object], memoryview] | None:
    """`decode`, with the payload as a view into `raw` (no copy: the query image is megabytes)."""
    start = len(MAGIC) + _HEAD.size
    if not raw.startswith(MAGIC) or len(raw) < start:
        return None
    version, hlen, plen, check = _HEAD.unpack_from(raw, len(MAGIC))
    if version != FORMAT_VERSION or len(raw) != start + hlen + plen:
        return None
    view = memoryview(raw)
    if zlib.crc32(view[start:]) != check:
        return None
    try:
        header = marshal.loads(view[start:start + hlen])
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(header, dict):
        return None
    return header, view[start + hlen:]


def read(path: str) -> tuple[dict[str, object], bytes] | None:
    """A cache file this user wrote, decoded; None when missing, foreign, truncated or corrupted."""
    raw = _raw(path)
    return None if raw is None else decode(raw)


def read_view(path: str) -> tuple[dict[str, object], memoryview] | None:
    """`read`, with the payload as a view (see decode_view)."""
    raw = _raw(path)
    return None if raw is None else decode_view(raw)


def header_length(path: str) -> int:
    """The length of a cache file's marshalled header, read from its fixed part alone (0 if unreadable)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC) + _HEAD.size)
    except OSError:
        return 0
    if len(head) < len(MAGIC) + _HEAD.size or not head.startswith(MAGIC):
        return 0
    return int(_HEAD.unpack_from(head, len(MAGIC))[1])


def _raw(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            if hasattr(os, "getuid") and os.fstat(f.fileno()).st_uid != os.getuid():
                return None
            return f.read()
    except OSError:
        return None


def write(path: str, data: bytes) -> bool:
    """Write through a temporary file in the same folder and a rename; False (never raises) on failure."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:  # noqa: SIM105  (contextlib costs the warm query path an import)
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        return False
    return True
