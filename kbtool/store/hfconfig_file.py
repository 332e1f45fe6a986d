"""Reading a Hugging Face config.json from disk into a validated `model` record (kb model import, kb query).

Beside the config it reads SOURCE.yaml (repo, path, commit the config was copied from: it becomes the
record's source) and hf_quant_config.json (ModelOpt's quantization, when the config names none).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kbtool.errors import UsageError
from kbtool.model.hfconfig import ConfigError, to_record
from kbtool.store.reader import load_yaml
from kbtool.store.untrusted import load_json

HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def looks_like_path(name: str) -> bool:
    """Whether `--model NAME` names a file (or a folder holding config.json) rather than a record id."""
    p = Path(name).expanduser()
    return name.endswith(".json") or p.is_file() or (p.is_dir() and ((p / "config.json").exists()
                                                                     or (p / "config.json").is_symlink()))


def default_id(path: Path) -> str:
    """The record id for a config: its folder's name, lowercased and kebab-cased."""
    stem = path.parent.name if path.name == "config.json" else path.stem
    rid = re.sub(r"[^a-z0-9.+-]+", "-", stem.lower()).strip("-.")
    return rid or "model"


def _side(folder: Path) -> dict[str, Any] | None:
    """SOURCE.yaml beside the config (None when there is none); read through the untrusted-file reader, so a
    FIFO, a huge file or an alias bomb is refused (exit 2), never read."""
    side = folder / "SOURCE.yaml"
    if not (side.exists() or side.is_symlink()):
        return None
    data = load_yaml(side)
    return data if isinstance(data, dict) else {}


def _neighbour_json(path: Path) -> dict[str, Any] | None:
    """A JSON file beside config.json (hf_quant_config.json): None when absent; it must be a JSON object."""
    if not (path.exists() or path.is_symlink()):
        return None
    data = load_json(path, nonfinite=True)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: is a JSON {type(data).__name__}, not an object",
                          fix=f"give ModelOpt's {path.name} (an object with a `quantization` block), or remove it")
    return data


# Fields published configs leave to their transformers config class (which vLLM loads too), by model type: the
# Gemma-3 multimodal configs omit text_config.vocab_size, heads, head_dim and the sliding-window pattern.
GEMMA3_TEXT = {"vocab_size": 262208, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
               "max_position_embeddings": 131072, "rope_theta": 1000000.0, "query_pre_attn_scalar": 256,
               "sliding_window_pattern": 6, "rope_local_base_freq": 10000.0}
# Qwen2.5-VL configs saved by transformers (the -AWQ releases, most fine-tunes) keep only a few vision_config fields
# (hidden_size, intermediate_size, out_hidden_size, patch and token fields) and leave the tower's depth, heads and
# patch sizes to Qwen25VisionConfig, whose defaults vLLM's loader fills too: without them the tower was left out.
QWEN2_5_VL_VISION = {"depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "num_heads": 16,
                     "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 112,
                     "out_hidden_size": 3584, "fullatt_block_indexes": [7, 15, 23, 31]}
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    **{t: {"repo": "huggingface/transformers", "path": "src/transformers/models/gemma3/configuration_gemma3.py",
           "commit": "008f5c8c29be84d4721dc6d1e0fcd72300580be4",
           "section": "Gemma3TextConfig.__init__ keyword defaults", "text_config": GEMMA3_TEXT}
       for t in ("gemma3", "gemma3_text")},
    "qwen2_5_vl": {"repo": "huggingface/transformers",
                   "path": "src/transformers/models/qwen2_5_vl/configuration_qwen2_5_vl.py",
                   "commit": "aa0dc95c2f288788c2cf06eb3e17bb182cea66d0",
                   "section": "Qwen25VisionConfig.__init__ keyword defaults", "vision_config": QWEN2_5_VL_VISION},
}


def _fill(target: Any, block: Any) -> int:
    """Set each field of `block` that `target` lacks (or holds as null); how many were set."""
    if not isinstance(target, dict) or not isinstance(block, dict):
        return 0
    n = 0
    for k, v in block.items():
        if target.get(k) is None and v is not None:
            target[k] = v
            n += 1
    return n


def _defaults(data: dict[str, Any], side: dict[str, Any] | None) -> dict[str, Any] | None:
    """Fill the fields a published config leaves to its transformers config class, from the `defaults` block
    of SOURCE.yaml (which cites that class), else from CLASS_DEFAULTS for the config's model type: `text_config`
    into the nested text_config (or the top level where there is none), `vision_config` into the vision_config.
    Return the source of what was filled, or None when there is none or nothing was missing."""
    d = (side or {}).get("defaults") or CLASS_DEFAULTS.get(str(data.get("model_type")))
    if not isinstance(d, dict) or not d.get("repo"):
        return None
    if not isinstance(d.get("text_config"), dict) and not isinstance(d.get("vision_config"), dict):
        return None
    nested = data.get("text_config")
    n = _fill(nested if isinstance(nested, dict) else data, d.get("text_config"))
    n += _fill(data.get("vision_config"), d.get("vision_config"))
    if n == 0 and not isinstance(d.get("text_config"), dict):
        return None  # a vision_config that names every field: nothing was taken from the class
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
    if data.get("host") not in (None, "github") and data.get("url"):
        src["url"] = str(data["url"])  # repo, path and commit name a Hugging Face repository: the url says so
    src["section"] = f"config.json of {data.get('model') or path.parent.name}"
    return src, str(data["model"]) if data.get("model") else None


def _longest_edge(path: Path) -> tuple[int, str] | None:
    """A Qwen-VL processor file's pixel limit and the field it came from: size.longest_edge (what vLLM's dummy item
    takes, qwen2_vl.py get_image_size_with_most_features), or the older top-level max_pixels; None where neither
    is there."""
    data = _neighbour_json(path)
    if data is None:
        return None
    size = data.get("size")
    for field, edge in (("size.longest_edge", size.get("longest_edge") if isinstance(size, dict) else None),
                        ("max_pixels", data.get("max_pixels"))):
        if isinstance(edge, int) and not isinstance(edge, bool) and edge > 0:
            return edge, field
    return None


def _processor_pixels(rec: dict[str, Any], folder: Path) -> None:
    """Fill a dynamic-resolution tower's pixel limits from the processor files beside config.json (the checkpoint's
    preprocessor_config.json and video_preprocessor_config.json, which vLLM's processor reads), where config.json
    alone left them out (kbtool/model/encoder.py profile_shape): without them kb cannot size the start-up encoder
    pass. Named as their source."""
    for enc in rec.get("encoders") or []:
        prof = enc.get("profile") if isinstance(enc, dict) else None
        if not isinstance(prof, dict) or prof.get("family") != "qwen-vit" or prof.get("max_pixels"):
            continue
        image = _longest_edge(folder / "preprocessor_config.json")
        if image is None:
            continue
        prof["max_pixels"] = image[0]
        where = f"{folder / 'preprocessor_config.json'} ({image[1]} {image[0]})"
        video = _longest_edge(folder / "video_preprocessor_config.json")
        if video is not None:
            prof["video_max_pixels"] = video[0]
            where += f" and video_preprocessor_config.json beside it ({video[1]} {video[0]})"
        prof["pixels_source"] = where


def read_config(name: str, rid: str | None = None, origin: dict[str, str] | None = None) -> dict[str, Any]:
    """The validated record data for the config at `name` (a config.json, or a folder holding one). `origin` is
    the source of a config from the Hugging Face cache or Hub (kbtool/store/hub.py Origin.source), which has no
    SOURCE.yaml beside it: it names the repository, file and commit."""
    path = Path(name).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if not (path.exists() or path.is_symlink()):
        raise UsageError(f"--model: no file {path}", fix="give the path to the model's config.json")
    data = load_json(path, nonfinite=True)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: is a JSON {type(data).__name__}, not an object",
                          fix="give the model's config.json")
    quant = _neighbour_json(path.parent / "hf_quant_config.json")
    src, hf_name = _source(path.parent, path) if origin is None else (dict(origin), origin["repo"])
    filled = _defaults(data, _side(path.parent))
    try:
        rec = to_record(data, rid or default_id(path), where=str(path), name=hf_name, source=src, quant=quant)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError, OverflowError) as e:
        # a field of the wrong type deep in the mapping (a string where a number belongs, a list for an object)
        raise ConfigError(f"{path}: a field has a value the importer cannot read ({type(e).__name__}: "
                          f"{str(e)[:160]})", fix="check the config's field types against the model's "
                          "transformers config class") from None
    if filled is not None:
        rec["sources"].append(filled)
        rec["notes"] = rec["notes"][:-1] + "; fields the config leaves out taken from its config class's defaults."
    if hf_name:
        rec["aliases"] = [hf_name.lower()]
    _processor_pixels(rec, path.parent)
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
