"""A compiled, validated cache of the KB, so a query does not parse and validate every record each time.

The cache of one records tree is one file in the cache folder ($KB_CACHE_DIR, else $XDG_CACHE_HOME/kb, else
~/.cache/kb; KB_CACHE_DIR set empty or KB_NO_CACHE=1 turns it off). Its header holds three keys:

- `stat`: every file under records/ and the schema folder with its size and mtime_ns (one stat each);
- `content`: a SHA-256 of every file's path and bytes, checked when `stat` differs, so a `touch` or a
  checkout that rewrites identical bytes keeps the cache (the header is then refreshed);
- `code`: kbtool's own sources, the Python version, the installed packages and the format version.

The payload is the pickled `LoadReport` (pydantic model instances, already validated: unpickling them skips
validation). A truncated, corrupted, foreign-version or stale file is never trusted: it is rebuilt
(see kbtool/store/cachefile.py for the format and the atomic write).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbtool.store import cachefile

if TYPE_CHECKING:
    from kbtool.kb import KB
    from kbtool.solve.image import Image
    from kbtool.solve.load import LoadReport


def cache_file(root: Path) -> Path | None:
    base = cachefile.cache_dir()
    if base is None:
        return None
    return Path(base) / f"kb-{cachefile.name_key(str(root.resolve()))}.cache"


def schema_folder() -> str | None:
    from kbtool.paths import schema_dir

    d = schema_dir()
    return str(d) if d.is_dir() else None


def enabled(use_cache: bool = True) -> bool:
    return use_cache and not os.environ.get("KB_NO_CACHE") and cachefile.cache_dir() is not None


def load_kb_report(root: Path, use_cache: bool = True) -> LoadReport:
    """The query's view of the KB (records that validate, plus what was left out), from the cache if fresh."""
    from kbtool.solve import load as build

    target = cache_file(root) if enabled(use_cache) and root.is_dir() else None
    if target is None:
        return build.load_kb_report(root)
    schema, tree = schema_folder(), str(root)
    skey, code = cachefile.stat_key(tree, schema), cachefile.code_key()
    entry = cachefile.read(str(target))
    if entry is not None and entry[0].get("code") == code and entry[0].get("root") == str(root.resolve()):
        header, payload = entry
        if header.get("stat") == skey:
            report = _unpack(payload)
            if report is not None:
                return report
        elif header.get("content") == cachefile.content_key(tree, schema):  # touched, not changed
            report = _unpack(payload)
            if report is not None:
                cachefile.write(str(target), cachefile.encode({**header, "stat": skey}, payload))
                return report
    return _rebuild(root, target, tree, schema, skey, code)


def _rebuild(root: Path, target: Path, tree: str, schema: str | None, skey: bytes, code: bytes) -> LoadReport:

    from kbtool.solve import load as build

    ckey = cachefile.content_key(tree, schema)
    report = build.load_kb_report(root)
    if cachefile.stat_key(tree, schema) == skey:  # nothing changed while it was read
        header: dict[str, object] = {"stat": skey, "content": ckey, "code": code, "root": str(root.resolve())}
        cachefile.write(str(target), cachefile.encode(header, _pack(report)))
    return report


def _pack(report: LoadReport) -> bytes:
    """The report with its records; where each came from (line maps, most of the bytes) in a second pickle
    that is only opened when something asks (a query never does)."""
    import pickle

    kb = report.kb
    original = kb.where
    where = {rid: (w.doc, w.path) for rid, w in original.items()}
    kb.where = {}
    try:
        return pickle.dumps((report, pickle.dumps(where, protocol=5)), protocol=5)
    finally:
        kb.where = original


def _restore(kb: KB, where: dict[str, tuple[Any, Path]]) -> dict[str, Any]:
    from kbtool.store.records import Loaded

    return {rid: Loaded(doc, path, kb.by_id.get(rid)) for rid, (doc, path) in where.items()}


def _unpack(payload: bytes) -> LoadReport | None:
    import pickle

    from kbtool.solve.load import LoadReport

    try:
        report, where = pickle.loads(payload)
    except Exception:  # passed its checksum yet does not load (e.g. a class moved): rebuild
        return None
    if not isinstance(report, LoadReport) or not isinstance(where, bytes):
        return None
    report.kb.where = LazyWhere(where, report.kb)
    return report


class LazyWhere(dict):  # type: ignore[type-arg]
    """`KB.where`, unpickled on first use."""

    def __init__(self, blob: bytes, kb: KB) -> None:
        super().__init__()
        self._blob: bytes | None = blob
        self._kb = kb

    def _fill(self) -> None:
        if self._blob is not None:
            import pickle

            blob, self._blob = self._blob, None
            dict.update(self, _restore(self._kb, pickle.loads(blob)))

    def __reduce_ex__(self, protocol: Any) -> Any:  # pickles (and copies) as the plain dict it stands for
        self._fill()
        return (dict, (dict(self.items()),))


def _filling(name: str) -> Any:
    real = getattr(dict, name)

    def method(self: LazyWhere, *args: Any, **kwargs: Any) -> Any:
        self._fill()
        return real(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in ("__getitem__", "__contains__", "__iter__", "__len__", "__repr__", "__eq__", "__ne__", "__or__",
              "__ior__", "__reversed__", "__setitem__", "__delitem__", "get", "items", "keys", "values", "copy",
              "pop", "popitem", "setdefault", "update", "clear"):
    setattr(LazyWhere, _name, _filling(_name))


def load_kb(root: Path, use_cache: bool = True) -> KB:
    """The validated records under `root`, indexed (bad records are left out), through the cache."""
    return load_kb_report(root, use_cache).kb


def load_image(root: Path, use_cache: bool = True) -> Image:
    """The query image of the records under `root`: from its cache file when fresh, else built from the
    loaded records (through the KB cache) and written back."""
    from kbtool.solve import image
    from kbtool.store import imagecache

    tree = str(root)
    if not enabled(use_cache) or not root.is_dir():
        report = load_kb_report(root, use_cache)
        return image.Image(image.build(report.kb, report.skipped))
    skey, code = imagecache.keys(tree)
    got = imagecache.peek_speculative(tree, lambda: skey)
    if got is not None and got[1]():
        img = image.Image.load(got[0])
        if img is not None:
            return img
    report = load_kb_report(root, use_cache)
    data = image.build(report.kb, report.skipped)
    if imagecache.keys(tree)[0] == skey:  # nothing changed while it was read
        imagecache.store(tree, skey, code, image.dump(data))
    return image.Image(data)
