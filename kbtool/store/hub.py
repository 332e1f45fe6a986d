"""A Hugging Face model's config.json, fetched once and cached, for `--model ORG/NAME` without a KB record.

The file comes from https://huggingface.co/ORG/NAME/resolve/REV/config.json (REV is the commit the model API
names, so the answer can cite it) with HF_TOKEN as bearer token where it is set, and is written with a SOURCE.yaml
(repo, path, commit, model) under KB_HF_CACHE (default ~/.cache/kb/hf). A cached copy is read without the network.
HF_HUB_OFFLINE=1 or KB_OFFLINE=1 keeps kb off the network. hf_quant_config.json (ModelOpt) comes along when the
repository has one.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

from kbtool.errors import UsageError

HUB = "https://huggingface.co"
TIMEOUT_S = 10.0


def cache_dir() -> Path:
    return Path(os.environ.get("KB_HF_CACHE") or Path.home() / ".cache" / "kb" / "hf").expanduser()


def offline() -> bool:
    return any(os.environ.get(k, "").strip().lower() in ("1", "true", "yes") for k in ("HF_HUB_OFFLINE", "KB_OFFLINE"))


def _get(url: str) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": "kb (attention-kernel knowledge base)"})
    name = "HF_TOKEN" if os.environ.get("HF_TOKEN") else "HUGGING_FACE_HUB_TOKEN"
    token = (os.environ.get(name) or "").strip()  # `$(cat token-file)` keeps no newline; one pasted may
    if token:
        if not (token.isascii() and token.isprintable()) or " " in token:
            raise UsageError(f"{name} holds a line break, space or control character; it was not sent",
                             fix=f"set {name} to the token alone (hf_...), without quotes or newlines")
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # https only: HUB is fixed
        data: bytes = resp.read()
        return data


def _fix(hf_id: str) -> str:
    repo = hf_id.partition("/")[2].lower()
    return (f"huggingface-cli download {hf_id} config.json --local-dir {repo} && kb query --model {repo}/config.json"
            f" (or `kb model import {repo}/config.json` to add it to the KB)")


def fetch_config(hf_id: str) -> Path:
    """The folder holding `hf_id`'s config.json and SOURCE.yaml (cached, else fetched); UsageError when it cannot
    be had, saying why (offline, not found, gated, network) and how to give the file instead."""
    folder = cache_dir() / hf_id.replace("/", "--")
    if (folder / "config.json").is_file():
        return folder
    if offline():
        raise UsageError(f"--model: '{hf_id}' has no KB record and kb is offline (HF_HUB_OFFLINE/KB_OFFLINE)",
                         fix=_fix(hf_id))
    try:
        info = json.loads(_get(f"{HUB}/api/models/{hf_id}"))
        rev = str(info.get("sha") or "main")
        config = _get(f"{HUB}/{hf_id}/resolve/{rev}/config.json")
        json.loads(config)
    except urllib.error.HTTPError as e:
        why = {401: "is gated or private (set HF_TOKEN)", 403: "is gated (accept its terms, set HF_TOKEN)",
               404: "was not found on the Hugging Face Hub"}.get(e.code, f"could not be read (HTTP {e.code})")
        raise UsageError(f"--model: '{hf_id}' has no KB record, and its config.json {why}", fix=_fix(hf_id)) from None
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise UsageError(f"--model: '{hf_id}' has no KB record, and the Hugging Face Hub could not be reached "
                         f"({reason})", fix=_fix(hf_id)) from None
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        raise UsageError(f"--model: '{hf_id}': the Hub's answer is not a JSON config", fix=_fix(hf_id)) from None
    try:
        quant: bytes | None = _get(f"{HUB}/{hf_id}/resolve/{rev}/hf_quant_config.json")
    except (urllib.error.URLError, TimeoutError, OSError):
        quant = None
    tmp = folder.with_name(folder.name + ".part")
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_bytes(config)
    if quant:
        (tmp / "hf_quant_config.json").write_bytes(quant)
    (tmp / "SOURCE.yaml").write_text(f"repo: {hf_id}\npath: config.json\ncommit: {rev}\nmodel: {hf_id}\n",
                                     encoding="utf-8")
    if folder.exists():  # another process got there first
        return folder
    tmp.rename(folder)
    return folder
