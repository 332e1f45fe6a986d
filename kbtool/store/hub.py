"""A Hugging Face model's config.json for `--model ORG/NAME` without a KB record: from the standard Hugging Face
cache first, else from the Hub through huggingface_hub, at a pinned commit, into that same cache.

- The cache is the one vLLM, SGLang and transformers share (kbtool/store/hfcache.py: HF_HUB_CACHE, HF_HOME).
  It is read without huggingface_hub, so an offline user whose engine downloaded the model gets an answer.
- The Hub is read only through huggingface_hub (the optional `hub` extra: `pip install 'kbtool[hub]'`), imported
  here and nowhere on the query path: one HEAD request (`get_hf_file_metadata`, no retries) resolves the revision
  (default main) to its commit, then `hf_hub_download` fetches the file at that commit into the standard cache;
  both honour HF_ENDPOINT (mirrors) and HF_TOKEN or the stored `hf auth login` token (gated models).
  hf_quant_config.json (ModelOpt) comes along at the same commit when the repository has one. An unreachable Hub
  fails at once: hf_hub_download alone, finding nothing cached, retries five times with backoff (23 s) and logs
  each try on stderr.
- HF_HUB_OFFLINE=1 (or KB_OFFLINE=1) keeps kb off the network.

Every answer names where the file came from: repository, file and commit (`Origin.text`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from kbtool.errors import KbError, UsageError
from kbtool.store.hfcache import CachedFile, cached_file, hub_cache

HUB = "https://huggingface.co"
TIMEOUT_S = 10.0


def offline() -> bool:
    return any(os.environ.get(k, "").strip().lower() in ("1", "true", "yes", "on")
               for k in ("HF_HUB_OFFLINE", "KB_OFFLINE"))


def endpoint() -> str:
    """The Hub's address: HF_ENDPOINT (a mirror) where it is set."""
    return (os.environ.get("HF_ENDPOINT") or HUB).rstrip("/")


def check_token() -> None:
    """A token that would be sent must be one header value: a pasted line break, space or control character is
    refused here, not sent (it ended in an uncaught ValueError from the HTTP header check: issue 48)."""
    name = "HF_TOKEN" if os.environ.get("HF_TOKEN") else "HUGGING_FACE_HUB_TOKEN"
    token = (os.environ.get(name) or "").strip()  # `$(cat token-file)` keeps no newline; one pasted may
    if token and (not (token.isascii() and token.isprintable()) or " " in token):
        raise UsageError(f"{name} holds a line break, space or control character; it was not sent",
                         fix=f"set {name} to the token alone (hf_...), without quotes or newlines")


@dataclass(frozen=True)
class Origin:
    """Where a config.json came from: its path here, the repository, the file, the commit, and how kb got it."""

    path: Path
    repo: str
    filename: str
    commit: str
    via: str  # "the Hugging Face cache <folder>" or "<endpoint>"

    @property
    def url(self) -> str:
        return f"{endpoint()}/{self.repo}/blob/{self.commit}/{self.filename}"

    @property
    def text(self) -> str:
        return f"{self.repo} {self.filename} at commit {self.commit[:12]}, from {self.via}"

    def source(self) -> dict[str, str]:
        """The record source this origin gives (kbtool/store/hfconfig_file.py read_config)."""
        return {"type": "doc", "repo": self.repo, "path": self.filename, "commit": self.commit, "url": self.url,
                "section": f"config.json of {self.repo}"}


def _from_cache(found: CachedFile) -> Origin:
    return Origin(path=found.path, repo=found.repo, filename=found.filename, commit=found.commit,
                  via=f"the Hugging Face cache {found.cache}")


def fix_line(hf_id: str) -> str:
    """How to give kb the file: download it into the standard cache, where kb reads it offline."""
    return (f"`hf download {hf_id} config.json` (on a machine with network; copy the cache folder "
            f"models--{hf_id.replace('/', '--')} into {hub_cache()}), then ask again; or give --model PATH/config.json")


def find_config(hf_id: str, revision: str | None = None) -> Origin | None:
    """`hf_id`'s config.json from the standard cache, or None."""
    found = cached_file(hf_id, "config.json", revision)
    return _from_cache(found) if found is not None else None


def fetch_config(hf_id: str, revision: str | None = None) -> Origin:
    """`hf_id`'s config.json: from the standard cache, else from the Hub into it. UsageError when it cannot be had,
    saying what was tried (the cache folder, offline, not found, gated, network) and how to give the file."""
    got = find_config(hf_id, revision)
    if got is not None:
        return got
    where = f"not in the Hugging Face cache ({hub_cache()})"
    if offline():
        raise UsageError(f"--model: '{hf_id}' has no KB record, is {where}, and kb is offline "
                         "(HF_HUB_OFFLINE/KB_OFFLINE)", fix=fix_line(hf_id))
    try:
        import huggingface_hub  # noqa: F401  (the optional `hub` extra; only this path needs it)
    except ImportError:
        raise UsageError(f"--model: '{hf_id}' has no KB record and is {where}; reading it from the Hub needs "
                         "huggingface_hub", fix=f"pip install 'kbtool[hub]', or {fix_line(hf_id)}") from None
    return _download(hf_id, revision or "main", where)


def _note_ref(folder: Path, revision: str, commit: str) -> None:
    """refs/<revision> -> commit, as hf_hub_download writes it for a branch or tag: the file was fetched at the
    commit, which writes no ref, and the next lookup by revision must find it in the cache."""
    from kbtool.store.hfcache import COMMIT
    from kbtool.store.writer import atomic_write

    if COMMIT.match(revision) or not COMMIT.match(commit) or ".." in revision.split("/"):
        return
    with contextlib.suppress(KbError):  # a read-only cache: the answer stands; the next one asks the Hub again
        atomic_write(folder / "refs" / revision, commit)


class _Unreachable(Exception):
    """The Hub's address did not answer (the HTTP client's error, named in the message)."""


def _download(hf_id: str, revision: str, where: str) -> Origin:
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    check_token()
    cache, ep = hub_cache(), endpoint()
    head = f"--model: '{hf_id}' has no KB record, is {where}, and"
    try:
        try:  # the revision's commit, in one request: a Hub that cannot be reached fails now, without retries
            meta = get_hf_file_metadata(hf_hub_url(hf_id, "config.json", revision=revision, endpoint=ep),
                                        timeout=TIMEOUT_S, endpoint=ep)
        except HfHubHTTPError:
            raise
        except Exception as e:  # the HTTP client's own errors (httpx's or requests'): connection, timeout, TLS
            raise _Unreachable(f"{type(e).__name__}: {str(e)[:120]}") from None
        path = Path(hf_hub_download(hf_id, "config.json", revision=meta.commit_hash or revision, cache_dir=cache,
                                    endpoint=ep, etag_timeout=TIMEOUT_S))
    except _Unreachable as e:
        raise UsageError(f"{head} {ep} could not be reached ({e.args[0]})", fix=fix_line(hf_id)) from None
    except GatedRepoError:
        raise UsageError(f"{head} is gated on {ep}: accept its terms on the model page, then set HF_TOKEN or run "
                         "`hf auth login`", fix=fix_line(hf_id)) from None
    except RevisionNotFoundError:
        raise UsageError(f"{head} has no revision '{revision}' on {ep}", fix=fix_line(hf_id)) from None
    except RepositoryNotFoundError:
        raise UsageError(f"{head} was not found on {ep} (or it is private: set HF_TOKEN)",
                         fix=fix_line(hf_id)) from None
    except LocalEntryNotFoundError:  # before EntryNotFoundError, its base: the Hub could not be reached
        raise UsageError(f"{head} {ep} could not be reached", fix=fix_line(hf_id)) from None
    except EntryNotFoundError:
        raise UsageError(f"{head} its repository on {ep} has no config.json", fix=fix_line(hf_id)) from None
    except HfHubHTTPError as e:
        code = getattr(getattr(e, "response", None), "status_code", None)
        raise UsageError(f"{head} {ep} answered HTTP {code}", fix=fix_line(hf_id)) from None
    except (OSError, ValueError) as e:
        raise UsageError(f"{head} {ep} could not be read ({type(e).__name__}: {str(e)[:120]})",
                         fix=fix_line(hf_id)) from None
    commit = path.parent.name
    _note_ref(path.parent.parent.parent, revision, commit)
    # ModelOpt's quantization file, at the same commit, where the repository has one
    with contextlib.suppress(EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError):
        hf_hub_download(hf_id, "hf_quant_config.json", revision=commit, cache_dir=cache, endpoint=ep,
                        etag_timeout=TIMEOUT_S)
    return Origin(path=path, repo=hf_id, filename="config.json", commit=commit, via=ep)
