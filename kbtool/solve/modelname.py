"""Reading a model's name the way a serving engineer does: from a folder path of another machine
(`/mnt/data/models/Qwen3-235B-A22B`, `/root/hf_model/Qwen/Qwen2-72B-Instruct-GPTQ-Int4`, `Qwen_Qwen3-30B-A3B-FP8/`,
`.../models--Qwen--Qwen3-8B/snapshots/<commit>`) or a Hugging Face id, matched to KB record names and aliases.

Pure functions over the image's name table (lowercased id or alias -> id); kbtool/solve/modelref.py decides the
order (records, the Hugging Face cache, the Hub) and says in the answer what was matched.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

TUNED = ("-instruct", "-thinking", "-chat", "-it", "-base", "-hf")
"""Name endings of a release tuned from (or the base of) a model with the same config shapes: Qwen/Qwen3-Next-80B-
A3B-Instruct is qwen3-next-80b-a3b. Quantized releases (-FP8, -AWQ) are QUANT_TOKENS below: their weights differ.
A release named by its year and month (`-Instruct-2507`) is not a tuning ending: see `release_at`."""

QUANT_TOKENS: dict[str, str | None] = {
    "fp8": "fp8", "nvfp4": "nvfp4", "fp4": "nvfp4", "mxfp4": "mxfp4",
    "int8": "int8", "w8a8": "int8", "w8a16": "int8",
    "int4": "int4", "w4a16": "int4", "awq": "int4", "gptq": "int4", "autoround": "int4",
    "bnb": None, "gguf": None, "4bit": None, "8bit": None,
    "bf16": "bf16", "fp16": "fp16",
}
"""The words of a quantized release's name ending (split at '-', '_' or '.', case ignored) and the weight format
each says (kbtool/solve/budget.py sizes it): `-GPTQ-Int4`, `-AWQ`, `-int4-awq` (gemma-3-27b-it-int4-awq in
sglang#4895), `-int4-mixed-AutoRound` (Intel's AutoRound, vllm#26646), `-quantized.w8a16` (Neural Magic / Red Hat
AI, vllm#7714: the word 'quantized', then 'w8a16'), `.w4a16` (vllm#17327), `-FP8-dynamic`, `-NVFP4`. GPTQ, AWQ
and AutoRound store int4 in groups unless a word says 8 bits. None: a format kb reads off the name but does not
size (bitsandbytes NF4, GGUF): the weights stay the base model's. `-BF16` / `-FP16` name a 16-bit re-release of a
checkpoint published quantized (DeepSeek-R1-BF16 in vllm#17470, unsloth's gpt-oss-20b-BF16): twice the fp8 bytes;
on a record already at 16 bits they change nothing."""

QUANT_NEUTRAL = frozenset({"dynamic", "static", "block", "mixed", "g128", "g32", "unsloth", "marlin", "sym", "asym",
                           "quantized"})
"""Words that sit inside a quantization ending but say no format by themselves (`-FP8-dynamic`, `-int4-mixed-`,
`-unsloth-bnb-4bit`): taken off with the ending, never an ending on their own."""


def quant_ending(low: str) -> tuple[int, str | None] | None:
    """(where the quantization ending starts in `low`, the format it says) for a lowercased name whose last
    words are quantization words, else None. Fp8/fp4 words win over integer ones; 8 bits over 4 for GPTQ/AWQ."""
    words = low.replace("_", "-").replace(".", "-").split("-")
    run = 0
    while run < len(words) - 1 and (words[-1 - run] in QUANT_TOKENS or words[-1 - run] in QUANT_NEUTRAL):
        run += 1
    real = [w for w in words[len(words) - run:] if w in QUANT_TOKENS]
    if not real:
        return None
    start = len(low) - sum(len(w) + 1 for w in words[len(words) - run:])
    fmts = {QUANT_TOKENS[w] for w in real}
    for f in ("fp8", "nvfp4", "mxfp4"):
        if f in fmts:
            return start, f
    if "int8" in fmts or ("8bit" in real and {"gptq", "awq"} & set(real)):
        return start, "int8"
    if "int4" in fmts:
        return start, "int4"
    for f in ("bf16", "fp16"):
        if f in fmts:
            return start, f
    return start, None


_HEX = frozenset("0123456789abcdef")
_NAME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def is_commit(text: str) -> bool:
    """A full Git commit hash: 40 lowercase hex digits."""
    return len(text) == 40 and _HEX.issuperset(text)


def is_hub_id(text: str) -> bool:
    """What a Hugging Face ORG/NAME can be: one '/' between names of letters, digits, '.', '_' and '-', each
    starting with a letter or digit. Anything else with a '/' is a path, a placeholder of the poster's included
    (`<PATH>/nytopop_Qwen3-30B-A3B.w4a16`, vllm#17327). String tests, not a regex: the warm query imports no re."""
    org, sep, name = text.partition("/")
    return bool(sep) and all(p and p[0] not in "._-" and _NAME.issuperset(p) for p in (org, name))


def is_pathlike(name: str) -> bool:
    """Whether `--model NAME` is written as a path (absolute, home, relative, a trailing slash, or more than one
    folder) rather than a record id or an ORG/NAME Hugging Face id."""
    n = name.strip()
    return (n.startswith(("/", "~", "./", "../", ".\\")) or n.endswith(("/", "\\")) or "\\" in n
            or n.count("/") >= 2 or ("/" in n and not is_hub_id(n)))


def folders(name: str) -> list[str]:
    """The path's folder names, last the model's folder (a Hugging Face cache snapshot stands for its repo). A
    ModelScope download writes each '.' of a name as '___' (`Qwen/Qwen2___5-VL-72B-Instruct`, vllm#13124): read
    back as '.'."""
    parts = [p.replace("___", ".") for p in name.strip().replace("\\", "/").split("/")
             if p and p not in (".", "..", "~")]
    if len(parts) >= 3 and parts[-2] == "snapshots" and is_commit(parts[-1]):
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


# folder names that say where weights are kept, not who published them: a path's ORG/NAME guess never takes
# one of these as the ORG (the fix line of a path nothing matches then names ORG/NAME for the user to fill)
STORE_FOLDERS = frozenset({"models", "model", "data", "weights", "checkpoints", "checkpoint", "ckpt", "hf_model",
                           "hf_models", "llm", "llms", "llm_model", "llm_models", "pretrained", "models-hf", "hub"})


def fetch_id(parts: list[str]) -> str:
    """The ORG/NAME a fix line asks the user to fetch for a path nothing matched: the path's own ORG/NAME where its
    parent folder may be an organisation, else ORG/<folder name>."""
    ids = [i for i in repo_ids(parts) if i.split("/", 1)[0].lower() not in STORE_FOLDERS]
    return ids[0] if ids else f"ORG/{parts[-1]}" if parts else "ORG/NAME"


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


def _dated(low: str) -> tuple[int, bool] | None:
    """(where a date ending starts in `low`, whether it is YYMM) for a name ending in -MMDD or -YYMM, else None."""
    head, sep, tail = low.rpartition("-")
    if not sep or len(tail) != 4 or not (tail.isascii() and tail.isdigit()):
        return None
    a, b = int(tail[:2]), int(tail[2:])
    if 1 <= a <= 12 and 1 <= b <= 31:
        return len(head), False
    return (len(head), True) if 24 <= a <= 29 and 1 <= b <= 12 else None


def revision_at(low: str) -> int | None:
    """Where a dated ending starts in `low` (its '-'), else None: MMDD (DeepSeek-R1-0528, DeepSeek-V3-0324) or YYMM
    from 2024 to 2029 (-2507, -2501)."""
    got = _dated(low)
    return got[0] if got else None


def release_at(low: str) -> int | None:
    """Where a year-and-month release ending (-YYMM, 2024 to 2029: Qwen3-30B-A3B-Instruct-2507,
    Mistral-Small-3.1-24B-Instruct-2503) starts in `low`, else None. Such a name is a new version of the model, not a
    checkpoint of the same config: Qwen3's 2507 releases have a 262,144-token native context where Qwen3-30B-A3B and
    Qwen3-235B-A22B have 40,960 (the 2507 model card; the records' configs), and Mistral-Small-3.1-2503 adds a vision
    tower to 3-2501's text model. So `untuned` never takes it off: such a name answers from a record only where the
    record names it (an alias), and kbtool/solve/modelref.py refuses the rest, naming the config to fetch
    (`dated_release`). A month-and-day ending (-0528, -0324) is DeepSeek's name for an updated checkpoint of the
    same architecture, taken off as before."""
    got = _dated(low)
    return got[0] if got and got[1] else None


def untuned(low: str) -> list[str]:
    """`low` and what is left of it as tuning endings and a month-and-day revision are taken off one by one
    (`llama-2-7b-chat-hf` -> `llama-2-7b-chat` -> `llama-2-7b`; `deepseek-r1-0528` -> `deepseek-r1`). A year-and-
    month release ending (`-2507`) stops it (`release_at`)."""
    out = [low]
    while True:
        tail = next((t for t in TUNED if out[-1].endswith(t) and len(out[-1]) > len(t)), None)
        if tail is None:
            got = _dated(out[-1])
            if not got or got[1]:
                return out
            out.append(out[-1][:got[0]])
            continue
        out.append(out[-1][:-len(tail)])


def spellings(low: str) -> list[str]:
    """The ways a lowercased folder name may spell a model name: '_' as written first (NVIDIA's own
    Llama-3_3-Nemotron-Super-49B-v1, vllm#15664), then read as '-', then '_' between two digits read as '.'
    (`hf_model_mistral_7B_Instruct_v0_2`, sglang#322; `Qwen2_5-7B-Instruct`); each also without a leading
    store-folder word joined to the name (`hf_model_`, `models-`)."""
    dotted = "".join("." if c == "_" and 0 < i < len(low) - 1 and low[i - 1].isdigit() and low[i + 1].isdigit()
                     else c for i, c in enumerate(low)).replace("_", "-")
    out = list(dict.fromkeys((low, low.replace("_", "-"), dotted)))
    for s in list(out):
        for w in sorted(STORE_FOLDERS, key=lambda w: (-len(w), w)):
            for pre in (f"{w}_", f"{w.replace('_', '-')}-"):
                if s.startswith(pre) and len(s) > len(pre):
                    out.append(s[len(pre):])
    return list(dict.fromkeys(out))


def stripped(names: dict[str, str], plain: Iterable[str]) -> tuple[str, str, str | None, str | None] | None:
    """(record id, the name matched, weights format or None, the quantization ending as written) for the first
    name that names a record once its quantization ending and then its tuning endings are taken off."""
    by_tail = tails(names)
    for text in plain:
        low = text.lower()
        fmt: str | None = None
        ending: str | None = None
        got = quant_ending(low)
        if got is not None:
            cut, fmt = got
            low, ending = low[:cut], text[cut:]
        for spelled in spellings(low):
            for cand in untuned(spelled):
                rid = names.get(cand) or by_tail.get(cand)
                if rid is not None and (ending is not None or cand != text.lower()):
                    return rid, text, fmt, ending
    return None


def dated_release(names: dict[str, str], plain: Iterable[str]) -> tuple[str, str, str] | None:
    """(record id, the name, its release ending, e.g. '-2507') for the first name that would name a record once a
    year-and-month release ending (and the tuning endings and quantization ending around it) were taken off: the
    record of an earlier version, which kb does not answer for this one (`release_at`)."""
    by_tail = tails(names)
    for text in plain:
        low = text.lower()
        got = quant_ending(low)
        if got is not None:
            low = low[:got[0]]
        for spelled in spellings(low):
            for cand in untuned(spelled):
                at = release_at(cand)
                if at is None:
                    continue
                for base in untuned(cand[:at]):
                    rid = names.get(base) or by_tail.get(base)
                    if rid is not None:
                        return rid, text, cand[at:]
    return None
