"""Reading a Hugging Face config.json from disk into a validated `model` record (kb model import, kb query).

Beside the config it reads SOURCE.yaml (repo, path, commit the config was copied from: it becomes the
record's source) and hf_quant_config.json (ModelOpt's quantization, when the config names none).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kbtool.errors import UsageError
from kbtool.model.hfconfig import ConfigError, to_record

HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def looks_like_path(name: str) -> bool:
    """Whether `--model NAME` names a file (or a folder holding config.json) rather than a record id."""
    p = Path(name).expanduser()
    return name.endswith(".json") or p.is_file() or (p.is_dir() and (p / "config.json").is_file())


def default_id(path: Path) -> str:
    """The record id for a config: its folder's name, lowercased and kebab-cased."""
    stem = path.parent.name if path.name == "config.json" else path.stem
    rid = re.sub(r"[^a-z0-9.+-]+", "-", stem.lower()).strip("-.")
    return rid or "model"


def _side(folder: Path) -> dict[str, Any] | None:
    side = folder / "SOURCE.yaml"
    if not side.is_file():
        return None
    from kbtool.store.reader import read_document

    doc, errs = read_document(side, str(side))
    return doc.data if doc is not None and not errs and isinstance(doc.data, dict) else {}


# Fields published configs leave to their transformers config class (which vLLM loads too), by model type: the
# Gemma-3 multimodal configs omit text_config.vocab_size, heads, head_dim and the sliding-window pattern.
GEMMA3_TEXT = {"vocab_size": 262208, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
               "max_position_embeddings": 131072, "rope_theta": 1000000.0, "query_pre_attn_scalar": 256,
               "sliding_window_pattern": 6, "rope_local_base_freq": 10000.0}
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    t: {"repo": "huggingface/transformers", "path": "src/transformers/models/gemma3/configuration_gemma3.py",
        "commit": "008f5c8c29be84d4721dc6d1e0fcd72300580be4", "section": "Gemma3TextConfig.__init__ keyword defaults",
        "text_config": GEMMA3_TEXT}
    for t in ("gemma3", "gemma3_text")}


def _defaults(data: dict[str, Any], side: dict[str, Any] | None) -> dict[str, Any] | None:
    """Fill the fields a published config leaves to its transformers config class, from the `defaults` block
    of SOURCE.yaml (which cites that class), else from CLASS_DEFAULTS for the config's model type; return the
    source of what was filled, or None when there is none."""
    d = (side or {}).get("defaults") or CLASS_DEFAULTS.get(str(data.get("model_type")))
    if not isinstance(d, dict) or not isinstance(d.get("text_config"), dict) or not d.get("repo"):
        return None
    nested = data.get("text_config")
    target: dict[str, Any] = nested if isinstance(nested, dict) else data
    for k, v in d["text_config"].items():
        if target.get(k) is None and v is not None:
            target[k] = v
    src: dict[str, Any] = {"type": "source-code", "repo": str(d["repo"]), "path": str(d.get("path", ""))}
    if d.get("commit"):
        src["commit"] = str(d["commit"])
    src["section"] = str(d.get("section") or "config class defaults")
    return src


def _source(folder: Path, path: Path) -> tuple[dict[str, Any] | None, str | None]:
    data = _side(folder)
    if data is None:
        return None, None
    side = folder / "SOURCE.yaml"
    if not isinstance(data, dict) or not data.get("repo") or not data.get("path"):
        raise UsageError(f"{side}: needs repo and path (and commit) of the config's source",
                         fix="write repo:, path:, commit: into SOURCE.yaml")
    src: dict[str, Any] = {"type": "doc", "repo": str(data["repo"]), "path": str(data["path"])}
    if data.get("commit"):
        src["commit"] = str(data["commit"])
    src["section"] = f"config.json of {data.get('model') or path.parent.name}"
    return src, str(data["model"]) if data.get("model") else None


def read_config(name: str, rid: str | None = None) -> dict[str, Any]:
    """The validated record data for the config at `name` (a config.json, or a folder holding one)."""
    path = Path(name).expanduser()
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--model: no file {path}", fix="give the path to the model's config.json") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: not a readable JSON config ({e})", fix="give the model's config.json") from None
    quant = None
    qfile = path.parent / "hf_quant_config.json"
    if qfile.is_file():
        try:
            quant = json.loads(qfile.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            quant = None
    src, hf_name = _source(path.parent, path)
    filled = _defaults(data, _side(path.parent))
    rec = to_record(data, rid or default_id(path), where=str(path), name=hf_name, source=src, quant=quant)
    if filled is not None:
        rec["sources"].append(filled)
        rec["notes"] = rec["notes"][:-1] + "; fields the config leaves out taken from its config class's defaults."
    if hf_name:
        rec["aliases"] = [hf_name.lower()]
    from pydantic import ValidationError

    from kbtool.model.model_card import Model

    try:
        Model.model_validate(rec)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise ConfigError(f"{path}: the record made from it does not validate: {loc}: {err['msg']}",
                          fix="write the record by hand (`kb new model ID`) or report the config") from None
    return rec
