"""`--model NAME`: a record id or alias, a config.json path, a Hugging Face id, or a path from another machine.

In order: a record id or alias; a config.json (or a folder holding one) that exists here; a Hugging Face id whose
NAME (or its base model's) is a record; its config.json from the standard Hugging Face cache, else the Hub
(kbtool/store/hub.py). A path that does not exist here is read by its folder names (kbtool/solve/modelname.py):
ORG/NAME pairs and names matched to records and aliases, then the Hugging Face cache, then a record once the
name's quantization ending (FP8, GPTQ-Int4, AWQ) is taken off, with the weights at that format. Whatever was
matched, and where a config came from (repository, file, commit), is said on the answer's `assumed:` line.

(A model record that does not validate never reaches here: kbtool/query_cli.py refuses to answer from a
records tree with errors and names the record's file, line and field.)"""

from __future__ import annotations

import os

from kbtool.solve.modelname import TUNED

TYPE_CHECKING = False  # the pasted-line query imports this module: typing and pathlib only where needed
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path  # imported where a path is read: pathlib costs a pasted-line query 7 ms
    from typing import Any, Protocol

    class Models(Protocol):
        """What this module needs of the query image (kbtool/solve/image.py): its names and a way to add a
        model."""

        def names(self, kind: str) -> dict[str, str]: ...

        def add_model(self, row: dict[str, Any], origin: str | None = None) -> str: ...

        def model_row(self, rid: str) -> dict[str, Any]: ...

        def note_origin(self, rid: str, origin: str) -> None: ...

    RowOf = Callable[[Any], dict[str, Any]]

__all__ = ["TUNED", "resolve_model"]


def _sized(rec: dict[str, Any], folder: Path, hub: Any = None) -> str:
    """Set the record's weight bytes from the safetensors headers beside its config, where the whole checkpoint is
    there (kbtool/store/checkpoint.py), else, for a config from a Hugging Face repository (`hub`: its Origin), from
    the headers' bytes read from the Hub with ranged requests (kbtool/store/hubweights.py); the words for the
    assumed line, or "" (parameters x bytes then, as the memory formula says)."""
    from kbtool.store.checkpoint import tensor_bytes
    from kbtool.store.untrusted import UntrustedInputError, load_json

    try:
        config = load_json(folder / "config.json", limit=16 << 20) if (folder / "config.json").is_file() else None
        got = tensor_bytes(folder, config if isinstance(config, dict) else None)
        if got is None and hub is not None:
            from kbtool.store.hubweights import hub_tensor_bytes

            got, why = hub_tensor_bytes(hub.repo, hub.commit, config if isinstance(config, dict) else None)
            if got is None:
                return f"; weights estimated as parameters x bytes ({why})" if why else ""
    except UntrustedInputError as e:
        return f"; weights estimated as parameters x bytes: the safetensors headers could not be read ({e.args[0]})"
    if got is None or got.total <= 0:
        return ""
    rec["weight_bytes"] = got.total
    f32 = got.by_dtype.get("F32", 0)
    if f32 and rec.get("weight_dtype") == "fp32":  # the engines' --dtype auto loads these at 2 bytes per value
        rec["weight_bytes_f32"] = f32
        return (f"; weights {got.text}; a float32 checkpoint: loaded at 2 B per value under the engines' --dtype "
                f"auto (bf16 or fp16, the answer's notes say which), {(got.total - f32 // 2) / 1e9:,.1f} GB")
    return f"; weights {got.text}"


def _local(img: Models, row_of: RowOf, key: str) -> str:
    """A config.json (or a folder holding one) here; its checkpoint's safetensors headers size the weights."""
    from pathlib import Path

    from kbtool.model.model_card import Model
    from kbtool.store.hfconfig_file import read_config

    rec = read_config(key)
    folder = Path(key).expanduser()
    said = _sized(rec, folder if folder.is_dir() else folder.parent)
    return img.add_model(row_of(Model.model_validate(rec)), origin=f"{rec['id']}{said}" if said else None)


def _from_config(img: Models, row_of: RowOf, origin: Any, rid: str, how: str) -> str:
    from kbtool.model.model_card import Model
    from kbtool.store.hfconfig_file import read_config

    rec = read_config(str(origin.path), rid=rid, origin=origin.source())
    said = _sized(rec, origin.path.parent, origin)
    return img.add_model(row_of(Model.model_validate(rec)), origin=f"{rid} from {origin.text}{how}{said}")


def _kebab(text: str) -> str:
    import re

    return re.sub(r"[^a-z0-9.+-]+", "-", text.lower()).strip("-.") or "model"


def _quantized(img: Models, rid: str, fmt: str | None, ending: str | None, how: str) -> str:
    """The record `rid`, or a copy of it with its weights at `fmt` where the name's ending says so."""
    row = img.model_row(rid)
    if fmt is None or row.get("weight_dtype") == fmt:
        said = f" (the ending '{ending}' is not a format kb sizes: weights as the record)" if ending and not fmt else ""
        img.note_origin(rid, f"{rid}{said}{how}")
        return rid
    new = f"{rid}-{fmt}"
    if new in img.names("model"):
        img.note_origin(img.names("model")[new], f"{new}{how}")
        return img.names("model")[new]
    row = {**row, "id": new, "weight_dtype": fmt, "quantized": None, "weight_bytes": None, "quant_group_size": None,
           "group_dtypes": None, "kept_unquantized": None}
    if ending and any(t in ending.lower() for t in ("awq", "gptq")):
        # AutoAWQ/AutoGPTQ exports often keep float16 (every such config.json kb holds says torch_dtype float16:
        # tests/data/hf-configs/qwen1.5-32b-chat-gptq-int4, probes/vllm_boot/models/llama-3.1-8b-instruct-awq-int4,
        # qwen2.5-7b-instruct-gptq-int4), so the base record's dtype is not this checkpoint's: the solver says so
        row["dtype_unread"] = True
    return img.add_model(row, origin=f"{rid} with {fmt} weights (the name's '{ending}'){how}")


def _dated_refusal(img: Models, texts: list[str], what: str, fetch: str) -> None:
    """Raise UsageError where a name is a year-and-month release (`-2507`) of a model kb records only in an earlier
    version (kbtool/solve/modelname.py `release_at`): kb does not answer from the earlier version's config, whose
    context (and more) the release may have changed; the error names both and the config to fetch."""
    from kbtool.errors import UsageError
    from kbtool.solve.modelname import dated_release

    hit = dated_release(img.names("model"), texts)
    if hit is None:
        return
    rid, text, ending = hit
    ctx = img.model_row(rid).get("max_context")
    held = f" ({ctx:,} tokens of context)" if isinstance(ctx, int) else ""
    raise UsageError(f"--model: {what}: '{text}' is the {ending} release of a model kb records as {rid}{held}, but a "
                     f"release named by year and month is a new version whose config.json can differ from the earlier "
                     f"one's (Qwen3-30B-A3B-Instruct-2507 has a 262,144-token context where Qwen3-30B-A3B has 40,960), "
                     f"so kb does not answer from {rid}'s",
                     fix=f"{fetch} into the Hugging Face cache (on a machine with network), then ask again; or give "
                     f"--model PATH/config.json; --model {rid} answers for {rid}'s own config")


def _cached(img: Models, row_of: RowOf, ids: list[str], names: list[str], how: str) -> str | None:
    """A config the standard Hugging Face cache holds for one of the ids, else for a repository of that name."""
    from kbtool.store.hfcache import cached_repos
    from kbtool.store.hub import find_config

    for hf_id in ids:
        got = find_config(hf_id)
        if got is not None:
            return _from_config(img, row_of, got, _kebab(hf_id.rsplit("/", 1)[-1]), how)
    repos = cached_repos()
    for name in names:
        hits = [r for r in repos if r.rsplit("/", 1)[-1].lower() == name.lower()]
        got = find_config(hits[0]) if len(hits) == 1 else None
        if got is not None:
            return _from_config(img, row_of, got, _kebab(name), how)
    return None


def _path_elsewhere(img: Models, key: str, row_of: RowOf) -> str:
    """A path that does not exist here, read by its folder names; UsageError naming what was tried."""
    from kbtool.errors import UsageError
    from kbtool.solve.modelname import exact, fetch_id, folders, model_names, repo_ids, stripped
    from kbtool.store.hfcache import hub_cache

    parts = folders(key)
    ids, names = repo_ids(parts), model_names(parts)
    here = "holds no config.json" if os.path.exists(os.path.expanduser(key)) else "does not exist here"

    def how(text: str) -> str:
        return f", recognised from the folder name '{text}' ({key} {here}; --model ID overrides)"

    hit = exact(img.names("model"), ids, names)
    if hit is not None:
        img.note_origin(hit[0], f"{hit[0]}{how(hit[1])}")
        return hit[0]
    got = _cached(img, row_of, ids, names, how(parts[-1] if parts else key))
    if got is not None:
        return got
    near = stripped(img.names("model"), names)
    if near is not None:
        rid, text, fmt, ending = near
        return _quantized(img, rid, fmt, ending, how(text))
    fetch = f"`hf download {fetch_id(parts)} config.json`"
    _dated_refusal(img, names, f"{key} {here}", fetch)
    tried = ", ".join(f"'{t}'" for t in [*ids, *names])
    raise UsageError(f"--model: {key} {here}, and its folder names ({tried}) match no KB record or "
                     f"alias, with or without a quantization ending, nor a model in the Hugging Face cache "
                     f"({hub_cache()})", fix="give --model ID (`kb list model` lists them), or the model's "
                     f"config.json, or {fetch} into the Hugging Face cache")


def _hf_id(img: Models, key: str, row_of: RowOf) -> str:
    """A Hugging Face id: a record named by its NAME (or its base model's), else its config.json from the cache or
    the Hub; where neither has it, a record whose ORG/NAME alias has the same NAME under another org (a re-upload:
    NousResearch/, unsloth/, RedHatAI/), else a record its name names once a quantization ending is taken off."""
    from kbtool.errors import UsageError
    from kbtool.solve.modelname import revision_at, untuned

    names = img.names("model")
    last = key.rsplit("/", 1)[-1].lower()
    steps = untuned(last)
    for i, cand in enumerate(steps):  # an instruction-tuned or base release has its base model's shapes
        if cand in names:
            if any(revision_at(s) is not None for s in steps[:i]):  # a month-and-day checkpoint: say so
                rid = names[cand]
                img.note_origin(rid, f"{rid}, recognised from the name {key} as a dated checkpoint of the same "
                                f"architecture: {rid}'s config assumed (`hf download {key} config.json` gives its own)")
            return names[cand]
    from kbtool.store.hub import fetch_config

    try:
        origin = fetch_config(key)
    except UsageError:
        from kbtool.solve.modelname import exact, stripped

        why = (f"its config.json is neither in the Hugging Face cache nor fetched (`hf download {key} config.json` "
               "gives kb the exact one)")
        hit = exact(names, [], [key.rsplit("/", 1)[-1]])
        if hit is not None:
            tail = hit[1].lower()
            alias = next((a for a in names if "/" in a and a.rsplit("/", 1)[-1] == tail), hit[0])
            img.note_origin(hit[0], f"{hit[0]}, recognised from the name {key} as its alias {alias} under another "
                            f"organisation: {why}")
            return hit[0]
        near = stripped(names, [key.rsplit("/", 1)[-1]])
        if near is None:
            _dated_refusal(img, [key.rsplit("/", 1)[-1]], f"{key} is not in the Hugging Face cache and kb is offline "
                           "or could not fetch it", f"`hf download {key} config.json`")
            raise
        rid, _, fmt, ending = near
        return _quantized(img, rid, fmt, ending, f", recognised from the name {key}: {why}")
    return _from_config(img, row_of, origin, _kebab(key.partition("/")[2]), "")


def resolve_model(img: Models, name: str, row_of: RowOf) -> str | None:
    """The id `name` names, after loading a config.json into `img` (as the row `row_of` makes of its model
    record) where it is one; None to fall back to the plain name lookup (which reports an unknown name with the
    nearest ids)."""
    key = name.strip()
    if key.lower() in img.names("model"):
        return None
    from kbtool.store.hfconfig_file import HF_ID, looks_like_path

    if looks_like_path(key):
        return _local(img, row_of, key)
    from kbtool.solve.modelname import is_pathlike

    if is_pathlike(key):
        return _path_elsewhere(img, key, row_of)
    if HF_ID.match(key):
        return _hf_id(img, key, row_of)
    from kbtool.solve.modelname import exact, stripped  # a bare folder name: a record's alias NAME, else stripped

    hit = exact(img.names("model"), [], [key])
    if hit is not None:
        img.note_origin(hit[0], f"{hit[0]}, recognised from the name '{key}' (its alias); --model ID overrides")
        return hit[0]
    near = stripped(img.names("model"), [key])
    if near is not None:
        return _quantized(img, near[0], near[2], near[3], f", recognised from the name '{key}'; --model ID overrides")
    _dated_refusal(img, [key], f"'{key}' names no record", f"`hf download ORG/{key} config.json`")
    return None
