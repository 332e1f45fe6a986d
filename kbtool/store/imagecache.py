"""The query image's cache file (kbtool/solve/image.py), read before anything heavy is imported.

One file per records tree, beside the KB cache: `kb-<hash of the tree's real path>.image`. Its header holds
the tree's `stat` key (every file under records/ and the schema folder with size and mtime_ns, see
kbtool/store/cachefile.py) and the `code` key; the payload is the marshalled image. `peek_speculative` hands
out the payload with a `fresh()` check: an image is used only when both keys still match, otherwise `kb query`
takes the full path, which rebuilds it (kbtool/store/cache.py: load_image). The stat key can be taken by a
forked child while the caller works (`stat_later`). Plain string paths, no pathlib (start-up time).
"""

from __future__ import annotations

import os

from kbtool.paths import schema_root
from kbtool.store import cachefile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


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


def peek_speculative(root: str, stat: Callable[[], bytes | None]) \
        -> tuple[memoryview, Callable[[], bool]] | None:
    """The cached image payload of `root` when it is intact and built by this code, with `fresh()`, which says
    whether the tree is unchanged since; None when there is no usable image at all.

    `stat` is `stat_later(root)`, started as early as possible. The caller may work on the payload before
    asking `fresh()`, but must let nothing it derived from it out unless `fresh()` is True.
    """
    path = image_path(root)
    if path is None:
        return None
    entry = cachefile.read_view(path)
    if entry is None:
        return None
    header, payload = entry
    if header.get("root") != os.path.realpath(root) or header.get("code") != cachefile.code_key():
        return None
    want = header.get("stat")
    return payload, lambda: stat() == want


SHARED = 64 << 20  # bytes of shared memory reserved for the child's answer (address space, not RAM)


PARALLEL_FILES = 1500  # below this many files, statting them here (~2 us each) beats forking a child


def files_hint(root: str) -> int:
    """About how many files the tree had when its image was written, from the image file's fixed header alone
    (the header is mostly the stat key: per file its absolute path, a little longer than the root's, and two
    numbers; the code key adds a few kB, so small trees read as a few times larger than they are); 0 when
    there is no image. It only decides whether to fork (PARALLEL_FILES), where being off by 2x costs ~1 ms."""
    path = image_path(root)
    per_file = len(os.path.abspath(root)) + 40
    return cachefile.header_length(path) // per_file if path else 0


def stat_later(root: str, parallel: bool = True) -> Callable[[], bytes | None]:
    """A function returning the stat key of `root` (see kbtool/store/cachefile.py), or None if it could not be
    taken. Taking it stats every file under the tree (about 2 us each: 20 ms at 10,000 records), so with
    `parallel`, fork and a second CPU, a child process takes it now, while this one goes on; the returned
    function collects it (and reaps the child). The child is forked before the image is read, while this
    process is small, and hands the key back whole through shared memory (it never waits on the parent), so
    both sides compare exactly the same bytes. A key that does not fit (over SHARED bytes, some 1.5 million
    files) is taken in this process instead. (A fork costs this process ~2 ms in copied pages: not worth it
    for small trees, see PARALLEL_FILES. A posix_spawn'd fresh interpreter was measured too: no better at
    10,000 records, worse at 2,000.)"""
    schema = schema_folder()
    if not (parallel and hasattr(os, "fork") and (os.cpu_count() or 1) > 1 and not os.environ.get("KB_NO_FORK")):
        return lambda: cachefile.stat_key(root, schema)
    import mmap

    try:
        shared = mmap.mmap(-1, SHARED)  # anonymous and shared with the child; pages cost only when written
        pid = os.fork()
    except OSError:
        return lambda: cachefile.stat_key(root, schema)
    if pid == 0:  # the child: write the key and leave at once (nothing buffered to flush, nothing to clean up)
        code = 1
        try:
            key = cachefile.stat_key(root, schema)
            if len(key) + 8 <= SHARED:
                shared[8:8 + len(key)] = key
                shared[:8] = len(key).to_bytes(8, "little")
                code = 0
        finally:
            os._exit(code)

    def collect() -> bytes | None:
        try:
            _, status = os.waitpid(pid, 0)
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                n = int.from_bytes(shared[:8], "little")
                return shared[8:8 + n]
            return cachefile.stat_key(root, schema)
        finally:
            shared.close()

    return collect


def store(root: str, stat: bytes, code: bytes, payload: bytes) -> bool:
    """Write the image of `root` (built when the tree had `stat`); False when there is no cache or it failed."""
    path = image_path(root)
    if path is None:
        return False
    return cachefile.write(path, cachefile.encode({"stat": stat, "code": code, "root": os.path.realpath(root)},
                                                  payload))
