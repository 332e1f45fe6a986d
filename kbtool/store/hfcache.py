"""The standard Hugging Face cache, read without huggingface_hub: where vLLM, SGLang and transformers put what they
download, so a model they already fetched answers offline.

The layout (huggingface_hub's file_download.py, the one huggingface_hub's `try_to_load_from_cache` reads):

    <cache>/models--ORG--NAME/refs/<revision>            the commit a branch or tag pointed to when downloaded
    <cache>/models--ORG--NAME/snapshots/<commit>/<file>  the file at that commit (a symlink into blobs/)
    <cache>/models--ORG--NAME/.no_exist/<commit>/<file>  the file is known to be absent at that commit

The cache folder is HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
~/.cache/huggingface/hub (huggingface_hub's constants.py), read from the environment at each call.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def hub_cache() -> Path:
    """The standard Hugging Face hub cache folder, as huggingface_hub resolves it from the environment."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME")
    if home:
        return Path(home).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def repo_folder(repo_id: str, cache: Path | None = None) -> Path:
    """The cache folder of a model repository: models--ORG--NAME."""
    return (cache or hub_cache()) / ("models--" + repo_id.replace("/", "--"))


@dataclass(frozen=True)
class CachedFile:
    """A file of a Hub repository found in the cache, and the commit it is the copy of."""

    path: Path
    repo: str
    filename: str
    commit: str
    cache: Path


def _folder(repo_id: str, cache: Path) -> Path | None:
    """The repository's folder, matched case-insensitively (the Hub treats ids so; the cache keeps the case the
    downloader typed)."""
    exact = repo_folder(repo_id, cache)
    if exact.is_dir():
        return exact
    want = exact.name.lower()
    try:
        with os.scandir(cache) as entries:
            for entry in entries:
                if entry.name.lower() == want and entry.is_dir():
                    return Path(entry.path)
    except OSError:
        return None
    return None


def _read_ref(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > 256:
            return None
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return text if COMMIT.match(text) else None


def cached_file(repo_id: str, filename: str, revision: str | None = None,
                cache: Path | None = None) -> CachedFile | None:
    """`filename` of `repo_id` at `revision` (a branch, tag or commit; default main) from the cache, or None when
    the cache does not hold it (as `try_to_load_from_cache`, without huggingface_hub)."""
    cache = cache or hub_cache()
    folder = _folder(repo_id, cache)
    if folder is None:
        return None
    rev = revision or "main"
    commit = rev if COMMIT.match(rev) else _read_ref(folder / "refs" / rev)
    if commit is None:
        return None
    path = folder / "snapshots" / commit / filename
    if not (path.is_file() or path.is_symlink()):
        return None
    name = folder.name[len("models--"):].replace("--", "/", 1)
    return CachedFile(path=path, repo=name, filename=filename, commit=commit, cache=cache)


def cached_repos(cache: Path | None = None) -> list[str]:
    """The model repository ids the cache holds (ORG/NAME, as the downloader spelled them), sorted."""
    cache = cache or hub_cache()
    try:
        with os.scandir(cache) as entries:
            names = [e.name for e in entries if e.name.startswith("models--") and e.is_dir()]
    except OSError:
        return []
    return sorted(n[len("models--"):].replace("--", "/", 1) for n in names if "--" in n[len("models--"):])
