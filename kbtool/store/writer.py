"""Writing records: atomic (temp file, fsync, rename), under a lock file, and minimal.

`update_verification` changes a claim's `verification` block and nothing else: the round-trip parser finds
where the block starts and ends, the new block is rendered alone and spliced in, so every other byte of the
file (comments, quoting, key order, line wrapping) stays identical. The result is re-read and compared before
it replaces the file. `write_new_record` creates a file that must not exist yet (evidence is never rewritten).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml.scalarstring import SingleQuotedScalarString

from kbtool.errors import WriteError
from kbtool.store import roundtrip
from kbtool.store.reader import LOADER
from kbtool.store.untrusted import file_kind


def _safe_load(text: str) -> Any:
    # the reader's loader (libyaml's scanner): the writer reads each record it edits three times, and the pure-Python
    # scanner was most of `kb probe apply --write`
    return yaml.load(text, Loader=LOADER)  # a SafeLoader: plain data only


LOCK_TIMEOUT_S = 30.0
WIDTH = 120


# ---- locking and atomic replacement ------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    except PermissionError:
        return True
    return True


MAX_PID = 2**22  # Linux's largest pid_max (4,194,304); anything else in a lock file is not a pid


def _holder(fd: int) -> int:
    """The pid a lock file names, or 0 when it names none a process could have (empty, text, negative, 0, or
    an absurd number such as 20 digits, which `os.kill` cannot take): such a lock is treated as stale."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 32).decode("ascii", "replace").strip()
    except OSError:
        return 0
    if not re.fullmatch(r"[0-9]{1,7}", text):
        return 0
    pid = int(text)
    return pid if 0 < pid <= MAX_PID else 0


def _check_lock_file(fd: int, path: Path, lock: Path) -> None:
    """Refuse a lock file kb must not truncate: not a regular file, or a hard link to a file elsewhere (the same
    inode, so the truncation and the pid would land in that file). Nothing has been written when this raises."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise WriteError(f"{path}: lock file {lock} is {file_kind(st.st_mode)}, not a regular file; not written",
                         fix=f"remove {lock} (kb creates it again)")
    if st.st_nlink > 1:
        raise WriteError(f"{path}: lock file {lock} has {st.st_nlink} links (a hard link to another file); "
                         "not written", fix=f"remove {lock} (kb creates it again; the other file is left as it is)")


@contextmanager
def file_lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[Path]:
    """Hold `.<name>.lock` beside `path` through flock(2): the kernel drops the lock when its holder dies, so a
    lock file left by a killed writer is taken over safely (and said on stderr), never waited on or deleted
    under a live one. The file holds the holder's pid, for the message a waiter gets."""
    import fcntl

    lock = path.with_name(f".{path.name}.lock")
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                         | getattr(os, "O_NOCTTY", 0), 0o644)
        except OSError as exc:
            raise WriteError(f"{path}: cannot create lock file {lock}: {exc.strerror or exc}",
                             fix="the records folder must be writable (check permissions, the mount, free space)") \
                from None
        try:
            _check_lock_file(fd, path, lock)
        except BaseException:
            os.close(fd)
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            if time.monotonic() > deadline:
                raise WriteError(f"{path}: locked by another writer ({lock}{f', pid {pid}' if pid else ''})",
                                 fix="wait for the other `kb` process to finish") from None
            time.sleep(0.05)
            continue
        except OSError as exc:
            os.close(fd)
            raise WriteError(f"{path}: cannot lock {lock}: {exc.strerror or exc}") from None
        try:
            mine, named = os.fstat(fd), os.stat(lock, follow_symlinks=False)
            same = (mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino)
            if same:  # linked between the first check and the flock
                _check_lock_file(fd, path, lock)
        except WriteError:
            os.close(fd)
            raise
        except OSError:
            same = False
        if not same:  # the previous holder removed the file between our open and our flock: lock the new one
            os.close(fd)
            continue
        break
    stale = _holder(fd)
    if stale and stale != os.getpid() and not _pid_alive(stale):
        logging.getLogger("kb").warning("kb: took over the stale lock %s (pid %s is not running)", lock, stale)
    try:
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(os.getpid()).encode())
    except OSError as exc:  # a full disk: the lock is held all the same (flock), only the pid note is missing
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            os.close(fd)
            raise WriteError(f"{path}: cannot write lock file {lock}: {exc.strerror or exc}") from None
    try:
        yield lock
    finally:
        with suppress(OSError):
            lock.unlink()
        os.close(fd)


def make_folder(folder: Path) -> None:
    """Create `folder` (and its parents) for a record; a WriteError when a file or something else is in the way
    (`records/models` a regular file ended in FileExistsError)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise WriteError(f"cannot write into {folder}: it is a file, not a folder; nothing written",
                         fix=f"move {folder} aside; records of this kind live in that folder") from None
    except NotADirectoryError:
        raise WriteError(f"cannot write into {folder}: a parent of it is a file, not a folder; nothing written",
                         fix="move the file aside") from None
    except OSError as exc:
        raise WriteError(f"cannot write into {folder}: {exc.strerror or exc}; nothing written",
                         fix="the records folder must be writable (check permissions, the mount, free space)") \
            from None


def atomic_write(path: Path, text: str | bytes, *, exclusive: bool = False, make_parents: bool = True) -> None:
    """Write `text` to a temp file in the same folder, fsync, then rename over `path` (or link, if exclusive).
    Any failure (full disk, read-only target, missing folder without `make_parents`) is a WriteError naming the
    path, and `path` is left as it was."""
    if not make_parents and not path.parent.is_dir():
        raise WriteError(f"cannot write {path}: no folder {path.parent}", fix=f"create {path.parent} first")
    try:
        st = os.stat(path)  # what the name leads to: the rename would put a regular file in its place
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):  # `--out /dev/full` replaced the device with a file
        raise WriteError(f"cannot write {path}: it is {file_kind(st.st_mode)}, not a regular file; not written",
                         fix="give the path of a regular file (or leave out --out to print)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc.strerror or exc}",
                         fix="the records folder must be writable (check permissions or the mount)") from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        if path.exists() and not exclusive:
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
        if exclusive:
            try:
                os.link(tmp, path)  # fails if the file exists: never overwrite a record meant to be new
            except FileExistsError:
                raise WriteError(f"{path} already exists", fix="records of this kind are never rewritten") from None
        else:
            os.replace(tmp, path)
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc.strerror or exc}",
                         fix="check free space and permissions; the file was left as it was") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


# ---- rendering ---------------------------------------------------------------------------------


def _protect(value: Any) -> Any:
    """Quote strings that a YAML 1.1 reader would not read back as the same string ('2026-11-30', 'on')."""
    if isinstance(value, dict):
        return {k: _protect(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_protect(v) for v in value]
    if isinstance(value, str):
        try:
            same = _safe_load(value) == value
        except yaml.YAMLError:
            same = False
        return value if same and value.strip() == value and value else SingleQuotedScalarString(value)
    return value


def dump(data: dict[str, Any]) -> str:
    """Block-style YAML for a mapping, in the records' style (2-space indent, lists at the key's column)."""
    return roundtrip.dump(_protect(data))


# ---- the verification splice -------------------------------------------------------------------


def _top_level_span(text: str, key: str) -> tuple[int, int] | None:
    """0-based [start, end) line span of a top-level key's entry, or None if the key is absent."""
    try:
        node = yaml.compose(text, Loader=LOADER)
    except yaml.YAMLError as exc:
        raise WriteError(f"cannot parse the record for editing: {exc}") from exc
    if not isinstance(node, yaml.MappingNode):
        raise WriteError("the record is not a YAML mapping")
    marks = [(k.value, k.start_mark) for k, _v in node.value if isinstance(k, yaml.ScalarNode)]
    keys = [k for k, _m in marks]
    if key not in keys:
        return None
    at = dict(reversed(marks))  # the first entry of a key (the reader refuses duplicates)
    start, col = at[key].line, at[key].column
    if col != 0:
        raise WriteError(f"`{key}` is not at column 0; cannot edit it in place")
    lines = text.splitlines(keepends=True)
    i = keys.index(key)
    end = marks[i + 1][1].line if i + 1 < len(marks) else len(lines)
    while end - 1 > start and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1  # blank lines and column-0 comments before the next key belong to that key
    return start, end


_ANCHOR = re.compile(r"(?:^|[\s\[{,:-])&([A-Za-z0-9_.-]+)")


def _refuse_shared_anchors(span: str, rest: str) -> None:
    """An anchor defined in the replaced block and aliased elsewhere would leave a dangling alias."""
    for name in _ANCHOR.findall(span):
        if re.search(rf"\*{re.escape(name)}\b", rest):
            raise WriteError(
                f"the verification block defines the YAML anchor &{name}, which the rest of the record uses",
                fix="expand the alias (write the repeated value out in full) and run again",
            )


# the key order of kbtool.model.common.Verification
VERIFICATION_ORDER = ("status", "evidence", "reason", "sides", "checked", "verdicts")


def splice_verification(text: str, block: dict[str, Any]) -> str:
    """`text` with its top-level `verification` entry replaced by `block` (appended if absent), its keys in the
    model's order (what `kb fmt` writes: status, evidence, reason, sides, checked)."""
    order = {k: i for i, k in enumerate(VERIFICATION_ORDER)}
    return splice_key(text, "verification", dict(sorted(block.items(), key=lambda kv: order.get(kv[0], len(order)))))


def splice_key(text: str, key: str, value: Any) -> str:
    """`text` with its top-level `key` entry replaced by `value` (appended if absent)."""
    rendered = dump({key: value})
    span = _top_level_span(text, key)
    lines = text.splitlines(keepends=True)
    if span is None:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        return "".join(lines) + rendered
    start, end = span
    _refuse_shared_anchors("".join(lines[start:end]), "".join(lines[:start] + lines[end:]))
    if end == len(lines) and lines and not lines[-1].endswith("\n"):
        rendered = rendered.rstrip("\n")
    return "".join(lines[:start]) + rendered + "".join(lines[end:])


def _check_only_verification_changed(old: str, new: str, block: dict[str, Any], name: str,
                                     scope: list[Any] | None = None) -> None:
    try:
        before, after = _safe_load(old), _safe_load(new)
    except yaml.YAMLError as exc:
        raise WriteError(f"{name}: the edited record does not parse ({exc}); nothing written") from exc
    got = after.pop("verification", None) if isinstance(after, dict) else None
    if isinstance(before, dict):
        before.pop("verification", None)
    if scope is not None and isinstance(after, dict) and isinstance(before, dict):
        if after.pop("scope", None) != scope:
            raise WriteError(f"{name}: the scope edit did not land as planned; nothing written")
        before.pop("scope", None)
    if before != after or got != block:
        raise WriteError(f"{name}: the edit would change more than the verification block; nothing written")


Block = dict[str, Any]
SCOPE_KEY = "__scope__"
"""A key of the block given to update_verification that is no verification field: the claim's new `scope` list
(version-range scope events from `kb probe apply`), written together with the verification block."""


def update_verification(path: Path, block: Block | Callable[[Any], Block | None]) -> bool:
    """Replace a claim file's verification block; True if the file changed. Atomic and locked.

    `block` may be a function of the file's current data, called while the lock is held: a writer that
    planned its change from an older read rebases it there, so two writers never lose each other's update.
    """
    with file_lock(path):
        try:
            old = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise WriteError(f"cannot read {path}: {exc}") from exc
        if callable(block):
            try:
                current = _safe_load(old)
            except yaml.YAMLError as exc:
                raise WriteError(f"{path}: cannot parse the record for editing: {exc}") from exc
            rebased = block(current)
            if rebased is None:
                return False
            block = rebased
        block = dict(block)
        scope = block.pop(SCOPE_KEY, None)  # scope events ride along with the verification block
        new = splice_verification(old, block)
        if scope is not None:
            new = splice_key(new, "scope", scope)
        if new == old:
            return False
        _check_only_verification_changed(old, new, block, str(path), scope)
        atomic_write(path, new)
        return True


def verification_changes(path: Path, block: Block) -> bool:
    """Whether update_verification(path, block) would change the file (read only, no lock): what `kb probe apply`
    shows as a change before, or instead of, writing."""
    try:
        old = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WriteError(f"cannot read {path}: {exc}") from exc
    block = dict(block)
    scope = block.pop(SCOPE_KEY, None)
    new = splice_verification(old, block)
    if scope is not None:
        new = splice_key(new, "scope", scope)
    return new != old


def write_new_record(path: Path, data: dict[str, Any]) -> None:
    """Create a record file that must not exist yet (evidence). Atomic and locked."""
    text = dump(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path):
        atomic_write(path, text, exclusive=True)
