"""A checkpoint's exact weight bytes, by dtype, from its safetensors headers (what the engines load), read locally.

A .safetensors file starts with 8 bytes (little-endian u64 N), then N bytes of JSON: for every tensor its dtype,
shape and `data_offsets` [begin, end) into the data that follows; `__metadata__` is free text. The bytes a tensor
takes are end - begin whatever its dtype, so packed formats (GPTQ/AWQ int32-packed int4, NVFP4 and MXFP4 as U8,
their scales, FP8 with its scales) count exactly, and so does every tensor an engine loads that kb's parameter
count leaves out (a multimodal model's vision encoder). A sharded checkpoint lists its files in
model.safetensors.index.json (`weight_map`); every file it names must be here, or nothing is claimed.

Tensors the engines do not load into the served model are left out and counted apart (`skipped`): the
multi-token-prediction (MTP / next-n) layers a checkpoint ships beside its `num_hidden_layers` (loaded only by a
speculative draft model), and rotary `inv_freq` buffers. vLLM 0.33.0 (commit 4ba787ec9):
vllm/model_executor/models/utils.py:575 get_spec_layer_idx_from_weight_name (layers num_hidden_layers ..
+ num_nextn_predict_layers - 1, skipped by deepseek_v2.py:1653 and the other MTP models), qwen3_next.py:823 and
qwen3_5.py:328 (`mtp.` mapped to nothing), utils.py:235 (`rotary_emb.inv_freq` dropped). SGLang 0.5.23 does the
same: srt/models/deepseek_common/deepseek_weight_loader.py:302 (layers past end_layer), qwen3_next.py:1186.
Everything else counts, vision and audio encoders included: both engines load them for a multimodal model.

Only the header is read (8 + N bytes, N at most 100 MiB as the format allows), with the checks of
kbtool/store/untrusted.py: a regular file, opened non-blocking, the JSON through its parser. The same parser reads
a header fetched from the Hub (kbtool/store/hubweights.py) through `add_header`.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kbtool.store.untrusted import UntrustedInputError, decode, file_kind, parse_json

MAX_HEADER = 100 << 20
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


@dataclass
class TensorBytes:
    """The bytes of a checkpoint's tensors: per safetensors dtype, their total, and the files read."""

    by_dtype: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # why -> bytes the engine does not load
    where: str = ""  # "" for files here; the Hub's address and commit where the headers were fetched

    @property
    def total(self) -> int:
        return sum(self.by_dtype.values())

    @property
    def text(self) -> str:
        parts = ", ".join(f"{d} {n:,} B" for d, n in sorted(self.by_dtype.items(), key=lambda t: -t[1]))
        n = len(self.files)
        out = (f"{self.total / 1e9:,.1f} GB ({self.total:,} B) from the safetensors headers of {n} "
               f"file{'s' if n != 1 else ''}{self.where} ({parts})")
        if self.skipped:
            out += "; not loaded: " + ", ".join(f"{why} {n:,} B" for why, n in sorted(self.skipped.items()))
        return out


Skip = Callable[[str], "str | None"]
"""A tensor name -> why the engine does not load it (None: it does)."""

_INV_FREQ = ("rotary_emb.inv_freq", "rotary_pos_emb.inv_freq")


def engine_skips(config: Mapping[str, object] | None) -> Skip:
    """What the engines leave out of the served model, for a checkpoint whose config.json is `config` (see the
    module docstring for the engines' code)."""
    cfg = config or {}
    text = cfg.get("text_config")
    if isinstance(text, Mapping) and "num_hidden_layers" not in cfg:
        cfg = {**text, **cfg}
    base, extra = cfg.get("num_hidden_layers"), cfg.get("num_nextn_predict_layers")
    spec = None
    if isinstance(base, int) and isinstance(extra, int) and extra > 0:
        idx = "|".join(str(base + i) for i in range(min(extra, 64)))
        spec = re.compile(rf"^(?:model\.|model\.language_model\.)?layers\.(?:{idx})\.")

    def why(name: str) -> str | None:
        if name.startswith(("mtp.", "model.mtp.")) or (spec is not None and spec.match(name)):
            return "MTP layers"
        if name.endswith(_INV_FREQ):
            return "rotary inv_freq"
        return None

    return why


def header(path: Path) -> tuple[dict[str, object], int]:
    """The JSON header of one .safetensors file and the size of its data section (UntrustedInputError when it is
    not one)."""
    name = str(path)
    try:
        st = os.stat(path)
    except OSError as e:
        raise UntrustedInputError(name, f"cannot read: {e.strerror or e}", fix="check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise UntrustedInputError(name, f"is {file_kind(st.st_mode)}, not a regular file; not read",
                                  fix="give the checkpoint's .safetensors files")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UntrustedInputError(name, "is not a regular file; not read", fix="give a regular file")
        head = os.pread(fd, 8, 0)
        if len(head) < 8:
            raise UntrustedInputError(name, "is shorter than a safetensors header", fix="re-download the file")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER or n + 8 > st.st_size:
            raise UntrustedInputError(name, f"declares a {n:,}-byte header, which the file cannot hold",
                                      fix="re-download the file")
        raw = os.pread(fd, n, 8)
    finally:
        os.close(fd)
    data = parse_json(decode(raw, name), name)
    if not isinstance(data, dict):
        raise UntrustedInputError(name, "the safetensors header is not a JSON object", fix="re-download the file")
    return data, st.st_size - 8 - n


def _add(out: TensorBytes, path: Path, skip: Skip | None = None) -> None:
    head, size = header(path)
    add_header(out, head, size, str(path), skip)
    out.files.append(path.name)


def add_header(out: TensorBytes, head: dict[str, object], size: int, name: str, skip: Skip | None = None) -> None:
    """Add one file's header to `out` (`size`: the bytes of its data section); UntrustedInputError naming `name`
    where a tensor's offsets are missing or outside the data."""
    for tname, info in head.items():
        if tname == "__metadata__":
            continue
        if not isinstance(info, dict) or not isinstance(info.get("data_offsets"), list) \
                or len(info["data_offsets"]) != 2 or not all(isinstance(x, int) for x in info["data_offsets"]):
            raise UntrustedInputError(name, f"tensor '{tname[:80]}' has no [begin, end) data_offsets",
                                      fix="re-download the file")
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= size:
            raise UntrustedInputError(name, f"tensor '{tname[:80]}' has offsets {begin}..{end} outside the "
                                      f"file's {size:,} data bytes", fix="re-download the file (a partial copy?)")
        why = skip(tname) if skip is not None else None
        if why is not None:
            out.skipped[why] = out.skipped.get(why, 0) + end - begin
            continue
        dtype = str(info.get("dtype", "?"))
        out.by_dtype[dtype] = out.by_dtype.get(dtype, 0) + end - begin


def shard_names(index: object, name: str) -> list[str] | None:
    """The files an index's `weight_map` names (sorted, each a plain file name); None where it names none."""
    wmap = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(wmap, dict) or not wmap:
        return None
    files = sorted({str(f) for f in wmap.values()})
    if any("/" in f or "\\" in f or f.startswith(".") or not f for f in files):
        raise UntrustedInputError(name, "names a file outside its folder", fix="re-download the index")
    return files


def tensor_bytes(folder: Path, config: Mapping[str, object] | None = None) -> TensorBytes | None:
    """The tensor bytes of the checkpoint in `folder` (its index's files, else model.safetensors) that the engines
    load for the model of `config`; None when the folder holds no complete safetensors checkpoint."""
    index = folder / INDEX
    if index.is_file():
        from kbtool.store.untrusted import load_json

        got = shard_names(load_json(index, limit=64 << 20), str(index))
        if got is None:
            return None
        files = got
        if not all((folder / f).is_file() for f in files):
            return None  # a partial download: the headers it lacks are not guessed
    elif (folder / SINGLE).is_file():
        files = [SINGLE]
    else:
        return None
    out, skip = TensorBytes(), engine_skips(config)
    for f in files:
        _add(out, folder / f, skip)
    return out
