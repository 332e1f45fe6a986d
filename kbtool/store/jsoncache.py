"""JSON data files kb ships (the recorded serve-flag tables, tests/data/<engine>/<release>/flags.json), parsed
once and kept marshalled in the cache folder, so that reading a pasted serve line costs no json (and no re, enum,
functools and collections, which json imports): about 8 ms of a warm `kb query --vllm-args ...` on 2 cores.

One file per data file, `json-<tag of its real path>.marshal`, sealed like every kb cache (kbtool.store.cache)
and read through kbtool.store.untrusted.read_cache. It holds the data file's real path, size and mtime_ns beside
the parsed value and is used only while all three still match; a stale, foreign or corrupted file reads as
absent and is written again. With the cache off (KB_NO_CACHE=1, KB_CACHE_DIR set empty) the file is parsed
each time.
"""

from __future__ import annotations

import marshal
import os

from kbtool.store.cache import cache_dir, seal, store, tag, unseal
from kbtool.store.untrusted import read_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAGIC = b"KB-JSON\n"


def _cache_path(real: str) -> str | None:
    base = cache_dir()
    if base is None:
        return None
    return os.path.join(base, f"json-{tag(real)}.marshal")


def load(path: str) -> Any:
    """The parsed JSON of the data file `path` (OSError where it cannot be read, ValueError where it is not
    JSON), from the cache folder while the file is unchanged."""
    real = os.path.realpath(path)
    st = os.stat(real)
    key = (real, st.st_size, st.st_mtime_ns)
    cpath = _cache_path(real)
    if cpath is not None:
        raw = read_cache(cpath, "cache-json")
        body = unseal(cpath, MAGIC, raw) if raw is not None else None
        if body is not None:
            try:
                held, value = marshal.loads(body)
            except (ValueError, EOFError, TypeError):
                held = None
            if held == key:
                return value
    import json

    with open(real, encoding="utf-8") as f:
        value = json.load(f)
    if cpath is not None:
        _write(cpath, marshal.dumps((key, value)))
    return value


def _write(cpath: str, body: bytes) -> None:
    sealed = seal(cpath, MAGIC, body)
    if sealed is not None:
        store(cpath, sealed)
