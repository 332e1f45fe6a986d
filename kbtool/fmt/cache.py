"""A small on-disk map of file contents already judged canonical or not, so `kb validate` stays fast.

Keyed by a fingerprint of the formatter (its version, the YAML libraries and every model's key order), so a
change to any of them starts a fresh set. The cache lives in $KB_CACHE_DIR, else $XDG_CACHE_HOME/kb, else
~/.cache/kb; KB_CACHE_DIR set to an empty value turns it off. Failing to read or write it is never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from functools import cache
from pathlib import Path

import ruamel.yaml
import yaml
from pydantic import BaseModel

from kbtool.fmt.order import child_models, key_order
from kbtool.model import MODELS
from kbtool.store.cachefile import cache_dir

FORMAT_VERSION = "1"


@cache
def fingerprint() -> str:
    seen: dict[str, tuple[str, ...]] = {}

    def walk(m: type[BaseModel]) -> None:
        if m.__qualname__ in seen:
            return
        seen[m.__qualname__] = key_order(m)
        for k in key_order(m):
            for c in child_models(m, k):
                walk(c)

    for m in MODELS.values():
        walk(m)
    raw = repr((FORMAT_VERSION, ruamel.yaml.__version__, yaml.__version__, sorted(seen.items())))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def cache_file() -> Path | None:
    base = cache_dir()
    return Path(base) / f"fmt-{fingerprint()}.txt" if base else None


def digest(name: str, text: str) -> str:
    """Digest of a file's place (which fixes its schema line) and content."""
    return hashlib.sha256(f"{name}\0{text}".encode()).hexdigest()


class Verdicts:
    """Known results per (place, content): 0 for canonical, else the first line that differs."""

    def __init__(self) -> None:
        self.path = cache_file()
        self.known: dict[str, int] = {}
        self.added = False
        if self.path is not None:
            with contextlib.suppress(OSError, UnicodeDecodeError, ValueError):
                for row in self.path.read_text("ascii").splitlines():
                    key, _, line = row.partition(" ")
                    self.known[key] = int(line or 0)

    def get(self, name: str, text: str) -> int | None:
        return self.known.get(digest(name, text))

    def put(self, name: str, text: str, line: int) -> None:
        self.known[digest(name, text)] = line
        self.added = True

    def save(self) -> None:
        if not (self.added and self.path):
            return
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text("".join(f"{k} {v}\n" for k, v in sorted(self.known.items())), "ascii")
            os.replace(tmp, self.path)
