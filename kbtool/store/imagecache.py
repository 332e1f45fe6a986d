"""The query image's cache file (kbtool/solve/image.py), read before anything heavy is imported.

One file per records tree, beside the KB cache: `kb-<hash of the tree's real path>.image`. Its header holds
the tree's `stat` key (every file under records/ and the schema folder with size and mtime_ns, see
kbtool/store/cachefile.py) and the `code` key; the payload is the marshalled image. `peek` returns the
payload only when both keys still match, so a stale image is never used: `kb query` then takes the full path,
which rebuilds it (kbtool/store/cache.py: load_image). Plain string paths, no pathlib (start-up time).
"""

from __future__ import annotations

import os

from kbtool.paths import schema_root
from kbtool.store import cachefile


def image_path(root: str) -> str | None:
    base = cachefile.cache_dir()
    if base is None or os.environ.get("KB_NO_CACHE"):
        return None
    return os.path.join(base, f"kb-{cachefile.name_key(os.path.realpath(root))}.image")


def schema_folder() -> str | None:
    d = schema_root()
    return d if os.path.isdir(d) else None


def keys(root: str) -> tuple[bytes, bytes]:
    """(stat key, code key) of the records tree `root` as it is now."""
    return cachefile.stat_key(root, schema_folder()), cachefile.code_key()


def peek(root: str) -> bytes | None:
    """The cached image payload of `root` when it is intact and fresh; None otherwise."""
    path = image_path(root)
    if path is None:
        return None
    entry = cachefile.read(path)
    if entry is None:
        return None
    header, payload = entry
    if header.get("root") != os.path.realpath(root) or header.get("code") != cachefile.code_key():
        return None
    if header.get("stat") != cachefile.stat_key(root, schema_folder()):
        return None
    return payload


def store(root: str, stat: bytes, code: bytes, payload: bytes) -> bool:
    """Write the image of `root` (built when the tree had `stat`); False when there is no cache or it failed."""
    path = image_path(root)
    if path is None:
        return False
    return cachefile.write(path, cachefile.encode({"stat": stat, "code": code, "root": os.path.realpath(root)},
                                                  payload))
