"""Parsed record files, cached by content: a file whose bytes did not change is not parsed again.

`kb validate` reads every record file; parsing YAML (with the line of every node) is most of what a run costs
once evidence is no longer judged again (kbtool.probe.verdict_cache). A file that parsed cleanly is stored as its
data, line map (packed; unpacked by the first finding that needs a line) and clean flag
(kbtool.store.reader.Document) under a digest of its bytes, beside a digest of kb's version and the reader's
source, in one sealed marshal file per records tree (kbtool.store.cache.seal: an edited entry voids the file):
`<cache dir>/docs-<tag>.marshal` (kbtool.store.cache; off with KB_NO_CACHE=1 or KB_CACHE_DIR set empty). The
file holds only entries of the last run's files, so it does not grow; a missing, foreign, corrupted or stale file
reads as empty, so it is safe to delete. A tree with no file yet takes, after 20 misses, the entries of the
newest file of another tree (entries are keyed by content: a copy of a validated tree parses only what differs).
Files of trees not validated for a week are removed. Files that failed to parse are never stored (their findings
are made again each time).
"""

from __future__ import annotations

import hashlib
import marshal
import os
from pathlib import Path
from typing import Any

from kbtool import __version__
from kbtool.store import cache as image_cache
from kbtool.store.document import Document
from kbtool.store.untrusted import read_cache

VERSION = 4  # entries: (data, line map as marshal bytes, clean)
MAGIC = b"KB-DOCS\n"
SEED_AFTER = 20  # misses in a tree with no cache file yet before another tree's entries are read
_SOURCES = (Path(__file__).with_name("reader.py"), Path(__file__).with_name("document.py"),
            Path(__file__).parent.parent / "escape.py")  # make an entry


def _salt() -> bytes:
    """What an entry was made by: kb's version, this format's and the reader's source. Stored in the file and
    compared on reading; the file's seal (kbtool.store.cache.seal) covers it and every entry."""
    try:
        return hashlib.sha256(f"{__version__} {VERSION}\n".encode()
                              + b"".join(p.read_bytes() for p in _SOURCES)).digest()
    except OSError:
        return b""


class DocCache:
    def __init__(self, root: Path) -> None:
        base = image_cache.cache_dir()
        self.path = None
        if base is not None:
            self.path = Path(base, f"docs-{image_cache.tag(str(root))}.marshal")
        self.salt = _salt()
        self.seed = False
        self.old: dict[bytes, Any] = self._read()
        self.new: dict[bytes, Any] = {}
        self.misses = 0

    def _read(self) -> dict[bytes, Any]:
        if self.path is None:
            return {}
        entries = self._load(self.path)
        self.seed = entries is None  # no cache of this tree yet: another tree's may hold its files (_seed)
        return entries or {}

    def _seed(self) -> None:
        """Take the entries of the newest other tree's cache file: entries are keyed by content, so a copy of a
        validated tree, or a checkout in a new folder, parses only what differs. Done once, after SEED_AFTER
        misses, so a small new tree (a test's) never reads a large cache it cannot use."""
        self.seed = False
        assert self.path is not None
        try:
            others = sorted((p for p in self.path.parent.glob("docs-*.marshal") if p != self.path),
                            key=lambda p: p.stat().st_mtime)
        except OSError:
            return
        entries = self._load(others[-1]) if others else None
        for key, value in (entries or {}).items():
            self.old.setdefault(key, value)

    def _load(self, path: Path) -> dict[bytes, Any] | None:
        """The entries of one cache file; None when there is none; empty when it fails any check (not a regular
        file, another user's, too big, its seal does not match: corrupted, edited, another kb's) or is stale."""
        if not os.path.lexists(path):
            return None
        raw = read_cache(str(path), "cache-docs")
        if raw is None or not raw.startswith(MAGIC):
            return {}
        body = image_cache.unseal(str(path), MAGIC, raw[len(MAGIC):])
        if body is None:
            return {}
        try:
            salt, entries = marshal.loads(body)
        except (ValueError, EOFError, TypeError):
            return {}
        return entries if salt == self.salt and isinstance(entries, dict) else {}

    def read(self, path: Path, name: str) -> tuple[Document | None, list[Any]]:
        """read_document(path, name), from the cache when the file's bytes are unchanged."""
        from kbtool.store.untrusted import UntrustedInputError, read_bytes

        try:
            raw = read_bytes(path, given=name)  # regular files only, size-limited (kbtool.store.untrusted)
        except UntrustedInputError:
            raw = None  # read_document reports why
        if raw is None:
            from kbtool.store.reader import read_document

            return read_document(path, name)
        key = hashlib.sha256(raw).digest()
        doc = self._hit(key, name)
        if doc is None and self.seed and self.misses + 1 >= SEED_AFTER:
            self._seed()
            doc = self._hit(key, name)
        if doc is not None:
            return doc, []
        self.misses += 1
        from kbtool.store.reader import parse_bytes

        doc, problems = parse_bytes(raw, name)
        if doc is not None and not problems:
            self.new[key] = (doc.data, marshal.dumps(doc.lines), doc.clean)  # unpacked only when a finding needs it
        return doc, problems

    def _hit(self, key: bytes, name: str) -> Document | None:
        hit = self.old.get(key) or self.new.get(key)
        if not (isinstance(hit, tuple) and len(hit) == 3 and isinstance(hit[1], bytes)):
            return None
        self.new[key] = hit
        return Document(name, hit[0], {}, hit[2] is True, packed=hit[1])

    def save(self) -> None:
        """Write the entries this run used, when any was parsed anew or the set shrank."""
        if self.path is None or (not self.misses and len(self.new) == len(self.old)):
            return
        try:
            body = marshal.dumps((self.salt, self.new))
        except ValueError:  # a value marshal cannot hold: no cache this time
            return
        from kbtool.errors import WriteError
        from kbtool.store.writer import atomic_write

        try:
            os.makedirs(self.path.parent, mode=0o700, exist_ok=True)
            sealed = image_cache.seal(str(self.path), MAGIC, body)
            if sealed is None:
                return
            image_cache.make_room(str(self.path))
            atomic_write(self.path, MAGIC + sealed)
            _prune(self.path.parent)
        except (OSError, WriteError):
            pass


def _prune(folder: Path, days: float = 7) -> None:
    """Remove the caches of trees not validated for `days` (temporary trees leave theirs behind)."""
    import time

    for p in folder.glob("docs-*.marshal"):
        try:
            if time.time() - p.stat().st_mtime > days * 86400:
                p.unlink()
        except OSError:
            pass
