"""The one reader for files kb did not write itself: records, evidence, probe output, config.json and its
neighbours, anything a remote worker returns.

Every read goes through `read_bytes`: the path is stat'ed before it is opened, and only a regular file is
opened (a FIFO, device, socket or folder is refused without a read, so nothing can hang); the file is opened
non-blocking and checked again on its descriptor, so a file swapped for a FIFO in between is refused too; at
most `limit` bytes are read. With `root`, a path whose real location (symlinks resolved) is outside `root` is
refused, and the message names the path the user gave. `load_json` and `load_yaml` add UTF-8, the record
reader's node, depth and alias limits (kbtool.store.reader), and numbers that are finite and in range.

kb's own caches are read through `read_cache`: the same checks plus the owner (a file another user wrote is not
trusted), and any refusal reads as "no cache" (the caller rebuilds it). `LIMITS` holds the size limit of each kind
of file. The warm query reads its cache through this module, so it imports nothing at run time beyond os and
stat (json and the YAML reader are imported where used).
"""

from __future__ import annotations

import os
import stat

from kbtool.errors import UsageError

TYPE_CHECKING = False  # no typing or pathlib at run time: the warm query path imports this module
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

MAX_BYTES = 1 << 20   # a record, an evidence file or a config.json is a few KB to a few hundred KB
LIMITS = {  # bytes, per kind of file kb reads
    "record": MAX_BYTES,
    "config": MAX_BYTES,          # a Hugging Face config.json and its neighbours
    "plan": 256 << 10,            # a campaign plan: a few lists of names
    "lock": 64,                   # a lock file holds a pid
    "secret": 64,                 # the key that seals kb's cache files (kbtool.store.cache)
    "cache-image": 64 << 20,      # the query image (the shipped tree's is about 0.5 MB)
    "cache-docs": 512 << 20,      # parsed documents of a tree (the shipped tree's is about 7 MB)
    "cache-verdicts": 16 << 20,   # one evidence record's verdicts
    "cache-judge-code": 16 << 20,  # each kbtool source's digest and imports (kbtool.probe.judge_code; ~60 KB)
    "cache-json": 16 << 20,       # a shipped JSON data file, marshalled (kbtool.store.jsoncache; ~40 KB each)
    "cache-weights": 4 << 20,     # checkpoints' tensor bytes read from the Hub (a few hundred bytes each)
    "probe-data": 256 << 20,      # a file a probe's judge reads (a recorded grid, a config.json)
}
_INF = float("inf")  # `-_INF < x < _INF`: finite (NaN fails every comparison); no math module on the warm path
MAX_DEPTH = 64        # as kbtool.store.reader
MAX_NODES = 200_000   # as kbtool.store.reader
MAX_INT_DIGITS = 20   # 2**63 has 19 digits: a 5,000-digit integer is refused before it is converted
MAX_ABS_INT = 2**63


class UntrustedInputError(UsageError):
    """A file kb was asked to read is not one it will read (not a regular file, too big, not UTF-8, bad
    JSON/YAML, a number out of range, a symlink out of the tree). Exit 2. `name` is the path as the user gave
    it, `reason` the message without it (for findings, which print the file apart)."""

    def __init__(self, name: str, reason: str, *, fix: str | None = None, line: int | None = None) -> None:
        super().__init__(f"{name}{f':{line}' if line else ''}: {reason}", fix=fix)
        self.name, self.reason, self.line = name, reason, line


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
          (stat.S_ISLNK, "a symlink"))


def file_kind(mode: int) -> str:
    """'a named pipe (FIFO)', 'a folder', ... for a stat mode that is not a regular file's."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def outside(path: Path | str, root: Path | str) -> str | None:
    """The real location of `path` when it lies outside `root` (symlinks resolved), else None."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return None if real == top or real.startswith(top.rstrip(os.sep) + os.sep) else real


def check_path(path: Path | str, *, given: str | None = None, root: Path | None = None) -> os.stat_result:
    """Stat `path` (following symlinks) and refuse anything but a regular file inside `root`; no open."""
    p = os.fspath(path)
    name = given or str(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            raise UntrustedInputError(name, f"dangling symlink (to {os.readlink(p)})",
                                      fix="point it at an existing file, or remove it") from None
        raise UntrustedInputError(name, "no such file", fix="check the path") from None
    except OSError as e:
        raise UntrustedInputError(name, f"cannot read: {e.strerror or e}", fix="check the path and permissions") \
            from None
    if root is not None:
        real = outside(p, root)
        if real is not None:
            raise UntrustedInputError(name, f"resolves to {real}, outside {root}",
                                      fix="copy the file into the tree instead of linking to it")
    if not stat.S_ISREG(st.st_mode):
        raise UntrustedInputError(name, f"is {file_kind(st.st_mode)}, not a regular file; not read",
                                  fix="give a regular file")
    return st


def read_bytes(path: Path | str, *, given: str | None = None, root: Path | None = None,
               limit: int = MAX_BYTES, own: bool = False) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see the module's docstring); with `own`, only a file
    this user owns."""
    name = given or str(path)
    st = check_path(path, given=given, root=root)
    if own and hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise UntrustedInputError(name, "is owned by another user; not read", fix="delete it")
    if st.st_size > limit:
        raise UntrustedInputError(name, f"file is {st.st_size:,} bytes; the limit is {limit:,}",
                                  fix="check it is the file you meant")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise UntrustedInputError(name, f"cannot read: {e.strerror or e}", fix="check the path and permissions") \
            from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between the stat and the open
            raise UntrustedInputError(name, f"is {file_kind(os.fstat(fd).st_mode)}, not a regular file; not read",
                                      fix="give a regular file")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as e:
        raise UntrustedInputError(name, f"cannot read: {e.strerror or e}", fix="check the path and permissions") \
            from None
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > limit:
        raise UntrustedInputError(name, f"file is over {limit:,} bytes", fix="check it is the file you meant")
    return raw


def read_cache(path: str, kind: str) -> bytes | None:
    """The bytes of one of kb's own cache files, or None when it is missing or fails any check (not a regular
    file, another user's, over the size limit of its kind): the caller ignores it and writes a new one."""
    try:
        return read_bytes(path, limit=LIMITS[kind], own=True)
    except UntrustedInputError:
        return None


def decode(raw: bytes, name: str) -> str:
    """UTF-8 text (a BOM is dropped), or an error naming the byte and its line."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise UntrustedInputError(name, line=line, reason=f"not UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start}",
                                  fix="re-save the file as UTF-8") from None


def read_text(path: Path | str, *, given: str | None = None, root: Path | None = None,
              limit: int = MAX_BYTES) -> str:
    return decode(read_bytes(path, given=given, root=root, limit=limit), given or str(path))


# ---- JSON ----------------------------------------------------------------------------------------


class _Refused(ValueError):
    pass


def _int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"integer of {len(s.lstrip('-')):,} digits is out of range")
    n = int(s)
    if abs(n) > MAX_ABS_INT:
        raise _Refused(f"integer {s} is out of range")
    return n


def _float(s: str) -> float:
    x = float(s)
    if not -_INF < x < _INF:
        raise _Refused(f"number {s[:40]} is out of range (not a finite float)")
    return x


def _constant(s: str) -> Any:
    raise _Refused(f"{s} is not a number JSON allows; numbers must be finite")


def parse_json(text: str, name: str, *, nonfinite: bool = False) -> Any:
    """JSON with finite, in-range numbers, at most MAX_DEPTH levels and MAX_NODES values. With `nonfinite`,
    NaN, Infinity and 1e400 are read as floats (published config.json files hold them, e.g. Nemotron-H's
    time_step_limit: [0.0, Infinity]); the caller then checks the fields it uses (kbtool.model.hfconfig)."""
    import json

    try:
        data = json.loads(text, parse_int=_int, parse_float=float if nonfinite else _float,
                          parse_constant=float if nonfinite else _constant)
    except _Refused as e:
        raise UntrustedInputError(name, f"{e}", fix="write a finite number in range") from None
    except json.JSONDecodeError as e:
        raise UntrustedInputError(name, line=e.lineno, reason=f"not valid JSON: {e.msg} (column {e.colno})",
                                  fix="give a JSON file") from None
    except (RecursionError, ValueError) as e:
        raise UntrustedInputError(name, f"not readable JSON: {str(e)[:200]}", fix="give a JSON file") from None
    check_tree(data, name, nonfinite=nonfinite)
    return data


def check_tree(data: Any, name: str, *, nonfinite: bool = False) -> None:
    """Depth, node count and finite numbers of plain data (what the YAML reader enforces while building)."""
    nodes = 0
    stack: list[tuple[Any, int, str]] = [(data, 0, "$")]
    while stack:
        value, depth, where = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise UntrustedInputError(name, f"more than {MAX_NODES:,} values", fix="check it is the file you meant")
        if depth > MAX_DEPTH:
            raise UntrustedInputError(name, f"{where}: nesting deeper than {MAX_DEPTH} levels",
                                      fix="check it is the file you meant")
        if isinstance(value, dict):
            stack += [(v, depth + 1, f"{where}.{k}") for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, depth + 1, f"{where}[{i}]") for i, v in enumerate(value)]
        elif isinstance(value, float) and not nonfinite and not -_INF < value < _INF:
            raise UntrustedInputError(name, f"{where}: {value} is not a finite number",
                                      fix="write a finite number")
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_ABS_INT:
            raise UntrustedInputError(name, f"{where}: integer out of range", fix="write a number in range")


def load_json(path: Path | str, *, given: str | None = None, root: Path | None = None,
              limit: int = MAX_BYTES, nonfinite: bool = False) -> Any:
    """A JSON file read through `read_bytes`, as plain data (`nonfinite`: see parse_json)."""
    name = given or str(path)
    return parse_json(decode(read_bytes(path, given=given, root=root, limit=limit), name), name,
                      nonfinite=nonfinite)
