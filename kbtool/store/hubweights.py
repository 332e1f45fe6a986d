"""A Hugging Face checkpoint's tensor bytes from its safetensors headers on the Hub, read with ranged requests.

Where the standard cache holds a model's config.json but not its .safetensors files (the usual case for a model kb
sized from its config only), the headers are read from the Hub at the config's commit: the index
(model.safetensors.index.json, downloaded into the standard cache like the config; a repository without one has a
single model.safetensors), then for each file it names `Range: bytes=0-7` (the header's length N, and the file's
size from Content-Range) and `Range: bytes=8-(8+N-1)` (the JSON header), parsed and counted as a local file's are
(kbtool/store/checkpoint.py: the same bounds, the same tensors the engines skip). Nothing else of a shard is
transferred; a server that ignores Range is read only as far as the header.

Through huggingface_hub (the optional `hub` extra, imported here only): HF_ENDPOINT (mirrors), HF_TOKEN or the
stored `hf auth login` token (gated models), its HTTP session. HF_HUB_OFFLINE=1 / KB_OFFLINE=1 read nothing.
What was read is kept, per repository and commit (a commit's files never change), in a sealed cache file of kb's
cache folder (kbtool.store.cache), so a model sized once is sized offline after.
"""

from __future__ import annotations

import marshal
import os
import struct
from collections.abc import Mapping
from typing import Any

from kbtool.store.checkpoint import INDEX, MAX_HEADER, SINGLE, TensorBytes, add_header, engine_skips, shard_names
from kbtool.store.untrusted import UntrustedInputError, decode, parse_json

VERSION = 1  # of the cached entries: bump when what is counted changes
MAGIC = b"KB-WEIGHTS\n"
MAX_FILES = 2_000  # shards one index may name (the largest public checkpoints have a few hundred)
MAX_ENTRIES = 500
WORKERS = 8
TIMEOUT_S = 10.0


class _Refused(Exception):
    """The Hub would not give a file: the words for the answer."""


def _cache_path() -> str | None:
    from kbtool.store.cache import cache_dir

    base = cache_dir()
    return None if base is None else os.path.join(base, "hub-weights.marshal")


def _load_cache(path: str) -> dict[str, Any]:
    from kbtool.store.cache import unseal
    from kbtool.store.untrusted import read_cache

    raw = read_cache(path, "cache-weights")
    if raw is None or not raw.startswith(MAGIC):
        return {}
    body = unseal(path, MAGIC, raw[len(MAGIC):])
    try:
        data = marshal.loads(body) if body is not None else {}
    except (ValueError, EOFError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}


def _key(repo: str, commit: str) -> str:
    return f"{repo.lower()}@{commit}@{VERSION}"


def cached(repo: str, commit: str) -> TensorBytes | None:
    path = _cache_path()
    entry = _load_cache(path).get(_key(repo, commit)) if path else None
    if not (isinstance(entry, tuple) and len(entry) == 4):
        return None
    by_dtype, files, skipped, where = entry
    return TensorBytes(by_dtype=dict(by_dtype), files=list(files), skipped=dict(skipped), where=str(where))


def _store(repo: str, commit: str, got: TensorBytes) -> None:
    from pathlib import Path

    from kbtool.errors import WriteError
    from kbtool.store.cache import make_room, seal
    from kbtool.store.writer import atomic_write, file_lock

    path = _cache_path()
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with file_lock(Path(path), timeout=1.0):
            data = _load_cache(path)
            data.pop(_key(repo, commit), None)
            while len(data) >= MAX_ENTRIES:
                data.pop(next(iter(data)))
            data[_key(repo, commit)] = (got.by_dtype, got.files, got.skipped, got.where)
            sealed = seal(path, MAGIC, marshal.dumps(data))
            if sealed is not None:
                make_room(path)
                atomic_write(Path(path), MAGIC + sealed)
    except (OSError, WriteError):
        return


def _get(session: Any, url: str, headers: dict[str, str], first: int, last: int) -> tuple[bytes, int | None]:
    """Bytes first..last of `url` (a Range request, streamed: a server that ignores Range sends the whole file, of
    which only what is needed is read) and the file's size where the answer says it."""
    want = last - first + 1
    skip = 0
    h = {**headers, "Range": f"bytes={first}-{last}", "Accept-Encoding": "identity"}
    is_httpx = callable(getattr(session, "stream", None))  # hf_hub 1.x: httpx.Client; before: requests.Session
    ctx = (session.stream("GET", url, headers=h, timeout=TIMEOUT_S, follow_redirects=True) if is_httpx
           else session.get(url, headers=h, timeout=TIMEOUT_S, stream=True))
    with ctx as r:
        code = r.status_code
        if code in (401, 403):
            raise _Refused(f"HTTP {code}: gated or private (set HF_TOKEN, or `hf auth login`)")
        if code == 404:
            raise _Refused("HTTP 404: not found")
        if code not in (200, 206):
            raise _Refused(f"HTTP {code}")
        size = None
        crange = r.headers.get("Content-Range", "")
        if code == 206 and "/" in crange and crange.rsplit("/", 1)[1].strip().isdigit():
            size = int(crange.rsplit("/", 1)[1])
        elif code == 200:
            skip = first  # the whole file: its first bytes are skipped
            length = r.headers.get("Content-Length", "")
            size = int(length) if length.isdigit() else None
        chunks = r.iter_bytes() if is_httpx else r.iter_content(65536)
        buf = bytearray()
        for chunk in chunks:
            buf += chunk
            if len(buf) >= skip + want:
                break
    data = bytes(buf[skip:skip + want])
    if len(data) < want:
        raise _Refused(f"the answer held {len(data)} of the {want} bytes asked for")
    return data, size


def _file_header(session: Any, url: str, headers: dict[str, str], name: str) -> tuple[dict[str, object], int]:
    head, size = _get(session, url, headers, 0, 7)
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER or (size is not None and n + 8 > size):
        raise UntrustedInputError(name, f"declares a {n:,}-byte header, which the file cannot hold",
                                  fix="check the repository's file")
    raw, _ = _get(session, url, headers, 8, 8 + n - 1)
    data = parse_json(decode(raw, name), name)
    if not isinstance(data, dict):
        raise UntrustedInputError(name, "the safetensors header is not a JSON object", fix="check the file")
    ends = [int(v["data_offsets"][1]) for k, v in data.items() if k != "__metadata__" and isinstance(v, dict)
            and isinstance(v.get("data_offsets"), list) and len(v["data_offsets"]) == 2
            and isinstance(v["data_offsets"][1], int)]
    return data, (size - 8 - n) if size is not None else max(ends, default=0)


def _files(repo: str, commit: str, ep: str) -> list[str]:
    """The .safetensors files of the checkpoint: its index's (from the standard cache, else downloaded into it),
    else model.safetensors."""
    from pathlib import Path

    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    from kbtool.store.hfcache import cached_file, hub_cache
    from kbtool.store.untrusted import load_json

    found = cached_file(repo, INDEX, commit)
    if found is not None:
        path = found.path
    else:
        try:
            path = Path(hf_hub_download(repo, INDEX, revision=commit, cache_dir=hub_cache(), endpoint=ep,
                                        etag_timeout=TIMEOUT_S))
        except EntryNotFoundError:
            return [SINGLE]
        except GatedRepoError:
            raise _Refused("gated (set HF_TOKEN, or `hf auth login`)") from None
        except RepositoryNotFoundError:
            raise _Refused("not found (or private: set HF_TOKEN)") from None
        except (HfHubHTTPError, OSError, ValueError) as e:
            raise _Refused(f"{type(e).__name__}: {str(e)[:120]}") from None
    files = shard_names(load_json(path, limit=64 << 20), f"{repo} {INDEX}")
    if files is None:
        raise _Refused(f"its {INDEX} names no files")
    if len(files) > MAX_FILES:
        raise UntrustedInputError(f"{repo} {INDEX}", f"names {len(files):,} files (kb reads at most {MAX_FILES:,})",
                                  fix="check the repository's index")
    return files


def hub_tensor_bytes(repo: str, commit: str, config: Mapping[str, object] | None) -> tuple[TensorBytes | None, str]:
    """The checkpoint's tensor bytes at `commit`, read from the Hub (or kb's cache of an earlier read), and "";
    else None and why they were not read (offline, no huggingface_hub, gated, not found, network). Malformed
    headers raise UntrustedInputError naming the file."""
    got = cached(repo, commit)
    if got is not None:
        return got, ""
    from kbtool.store.hub import check_token, endpoint, offline

    if offline():
        return None, "offline: the Hub's safetensors headers were not read"
    try:
        from huggingface_hub import get_session, hf_hub_url
        from huggingface_hub.utils._headers import build_hf_headers
    except ImportError:
        return None, "reading the Hub's safetensors headers needs huggingface_hub (pip install 'kbtool[hub]')"
    check_token()
    ep = endpoint()
    try:
        files = _files(repo, commit, ep)
        session, headers = get_session(), build_hf_headers()
        from concurrent.futures import ThreadPoolExecutor

        def one(f: str) -> tuple[dict[str, object], int]:
            return _file_header(session, hf_hub_url(repo, f, revision=commit, endpoint=ep), headers, f"{repo} {f}")

        with ThreadPoolExecutor(max_workers=min(WORKERS, len(files))) as pool:
            heads = list(pool.map(one, files))
    except _Refused as e:
        return None, f"the safetensors headers could not be read from {ep}: {e}"
    except UntrustedInputError:
        raise
    except Exception as e:  # the HTTP client's own errors (connection, timeout): the answer falls back
        return None, f"the safetensors headers could not be read from {ep}: {type(e).__name__}: {str(e)[:120]}"
    out, skip = TensorBytes(where=f" read from {ep} at commit {commit[:12]}"), engine_skips(config)
    for f, (head, size) in zip(files, heads, strict=True):
        add_header(out, head, size, f"{repo} {f}", skip)
        out.files.append(f)
    _store(repo, commit, out)
    return out, ""
