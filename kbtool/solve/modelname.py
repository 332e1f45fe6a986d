"""Reading a model's name the way a serving engineer does: from a folder path of another machine
(`/mnt/data/models/Qwen3-235B-A22B`, `/root/hf_model/Qwen/Qwen2-72B-Instruct-GPTQ-Int4`, `Qwen_Qwen3-30B-A3B-FP8/`,
`.../models--Qwen--Qwen3-8B/snapshots/<commit>`) or a Hugging Face id, matched to KB record names and aliases.

Pure functions over the image's name table (lowercased id or alias -> id); kbtool/solve/modelref.py decides the
order (records, the Hugging Face cache, the Hub) and says in the answer what was matched.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

TUNED = ("-instruct-2507", "-thinking-2507", "-instruct", "-thinking", "-chat", "-it", "-base", "-hf")
"""Name endings of a release tuned from (or the base of) a model with the same config shapes: Qwen/Qwen3-Next-80B-
A3B-Instruct is qwen3-next-80b-a3b. Quantized releases (-FP8, -AWQ) are QUANT below: their weights differ."""

QUANT: tuple[tuple[str, str | None], ...] = (
    ("-gptq-int4", "int4"), ("-gptq-int8", "int8"), ("-gptq-4bit", "int4"), ("-gptq-8bit", "int8"),
    ("-gptq", "int4"), ("-awq-int4", "int4"), ("-awq", "int4"), ("-w4a16", "int4"), ("-int4", "int4"),
    ("-w8a8", "int8"), ("-w8a16", "int8"), ("-int8", "int8"),
    # Neural Magic / Red Hat AI's names (neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 in vllm#10521)
    ("-quantized.w8a8", "int8"), ("-quantized.w8a16", "int8"), ("-quantized.w4a16", "int4"),
    ("-fp8-dynamic", "fp8"), ("-fp8-static", "fp8"), ("-fp8-block", "fp8"), ("-fp8", "fp8"),
    ("-nvfp4", "nvfp4"), ("-fp4", "nvfp4"), ("-mxfp4", "mxfp4"),
    ("-bnb-4bit", None), ("-4bit", None), ("-gguf", None),
)
"""Quantization endings of a release's name and the weight format kb sizes them as (kbtool/solve/budget.py): GPTQ
and AWQ releases store int4 in groups of 128 unless the name says Int8; None: the ending is read off the name,
but kb does not size that format (bitsandbytes NF4, GGUF), so the weights stay the base model's."""

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def is_pathlike(name: str) -> bool:
    """Whether `--model NAME` is written as a path (absolute, home, relative, a trailing slash, or more than one
    folder) rather than a record id or an ORG/NAME Hugging Face id."""
    n = name.strip()
    return (n.startswith(("/", "~", "./", "../", ".\\")) or n.endswith(("/", "\\")) or "\\" in n
            or n.count("/") >= 2)


def folders(name: str) -> list[str]:
    """The path's folder names, last the model's folder (a Hugging Face cache snapshot stands for its repo)."""
    parts = [p for p in re.split(r"[\\/]+", name.strip()) if p and p not in (".", "..", "~")]
    if len(parts) >= 3 and parts[-2] == "snapshots" and COMMIT.match(parts[-1]):
        parts = parts[:-2]
    return parts


def repo_ids(parts: list[str]) -> list[str]:
    """The ORG/NAME ids a path may spell: its last two folders, models--ORG--NAME, ORG--NAME and ORG_NAME."""
    if not parts:
        return []
    last = parts[-1]
    out = []
    if last.startswith("models--") and last.count("--") >= 2:
        out.append(last[len("models--"):].replace("--", "/", 1))
    elif "--" in last:
        out.append(last.replace("--", "/", 1))
    if len(parts) >= 2:
        out.append(f"{parts[-2]}/{last}")
    if "_" in last and "--" not in last:
        org, _, rest = last.partition("_")
        if org and rest and "-" not in org:
            out.append(f"{org}/{rest}")
    return list(dict.fromkeys(out))


def model_names(parts: list[str]) -> list[str]:
    """The model names a path may spell (the NAME of each id, then the folder's own name)."""
    names = [i.rsplit("/", 1)[-1] for i in repo_ids(parts)]
    if parts:
        names.append(parts[-1])
    return list(dict.fromkeys(n for n in names if n))


def tails(names: dict[str, str]) -> dict[str, str]:
    """NAME (lowercased) -> id for every ORG/NAME alias whose NAME no other record's alias shares."""
    seen: dict[str, set[str]] = {}
    for alias, rid in names.items():
        if "/" in alias:
            seen.setdefault(alias.rsplit("/", 1)[-1], set()).add(rid)
    return {t: next(iter(ids)) for t, ids in seen.items() if len(ids) == 1}


def exact(names: dict[str, str], ids: Iterable[str], plain: Iterable[str]) -> tuple[str, str] | None:
    """(record id, the text that matched) for the first id, alias or alias NAME that names a record exactly."""
    by_tail = tails(names)
    for text in ids:
        if text.lower() in names:
            return names[text.lower()], text
    for text in plain:
        low = text.lower()
        if low in names:
            return names[low], text
        if low in by_tail:
            return by_tail[low], text
    return None


def stripped(names: dict[str, str], plain: Iterable[str]) -> tuple[str, str, str | None, str | None] | None:
    """(record id, the name matched, weights format or None, the quantization ending as written) for the first
    name that names a record once its quantization ending and then its tuning ending are taken off."""
    by_tail = tails(names)
    for text in plain:
        low = text.lower().replace("_", "-")
        fmt: str | None = None
        ending: str | None = None
        for suffix, f in QUANT:
            if low.endswith(suffix):
                low, fmt, ending = low[:-len(suffix)], f, text[-len(suffix):]
                break
        for cand in (low, *(low[:-len(t)] for t in TUNED if low.endswith(t))):
            rid = names.get(cand) or by_tail.get(cand)
            if rid is not None and (ending is not None or cand != text.lower()):
                return rid, text, fmt, ending
    return None
