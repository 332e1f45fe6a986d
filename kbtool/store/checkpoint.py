"""A checkpoint's exact weight bytes, by dtype, from its safetensors headers (what the engines load), read locally.

A .safetensors file starts with 8 bytes (little-endian u64 N), then N bytes of JSON: for every tensor its dtype,
shape and `data_offsets` [begin, end) into the data that follows; `__metadata__` is free text. The bytes a tensor
takes are end - begin whatever its dtype, so packed formats (GPTQ/AWQ int32-packed int4, NVFP4 and MXFP4 as U8,
their scales, FP8 with its scales) count exactly, and so does every tensor an engine loads that kb's parameter
count leaves out (a multimodal model's vision encoder). A sharded checkpoint lists its files in
model.safetensors.index.json (`weight_map`); every file it names must be here, or nothing is claimed.

Only the header is read (8 + N bytes, N at most 100 MiB as the format allows), with the checks of
kbtool/store/untrusted.py: a regular file, opened non-blocking, the JSON through its parser.
"""

from __future__ import annotations

import os
import stat
import struct
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

    @property
    def total(self) -> int:
        return sum(self.by_dtype.values())

    @property
    def text(self) -> str:
        parts = ", ".join(f"{d} {n:,} B" for d, n in sorted(self.by_dtype.items(), key=lambda t: -t[1]))
        return f"{self.total:,} B from the safetensors headers of {len(self.files)} file(s) ({parts})"


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


def _add(out: TensorBytes, path: Path) -> None:
    head, size = header(path)
    for tname, info in head.items():
        if tname == "__metadata__":
            continue
        if not isinstance(info, dict) or not isinstance(info.get("data_offsets"), list) \
                or len(info["data_offsets"]) != 2 or not all(isinstance(x, int) for x in info["data_offsets"]):
            raise UntrustedInputError(str(path), f"tensor '{tname[:80]}' has no [begin, end) data_offsets",
                                      fix="re-download the file")
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= size:
            raise UntrustedInputError(str(path), f"tensor '{tname[:80]}' has offsets {begin}..{end} outside the "
                                      f"file's {size:,} data bytes", fix="re-download the file (a partial copy?)")
        dtype = str(info.get("dtype", "?"))
        out.by_dtype[dtype] = out.by_dtype.get(dtype, 0) + end - begin
    out.files.append(path.name)


def tensor_bytes(folder: Path) -> TensorBytes | None:
    """The tensor bytes of the checkpoint in `folder` (its index's files, else model.safetensors); None when the
    folder holds no complete safetensors checkpoint."""
    index = folder / INDEX
    if index.is_file():
        from kbtool.store.untrusted import load_json

        data = load_json(index, limit=64 << 20)
        wmap = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(wmap, dict) or not wmap:
            return None
        files = sorted({str(f) for f in wmap.values()})
        if any("/" in f or "\\" in f or f.startswith(".") for f in files):
            raise UntrustedInputError(str(index), "names a file outside its folder", fix="re-download the index")
        if not all((folder / f).is_file() for f in files):
            return None  # a partial download: the headers it lacks are not guessed
    elif (folder / SINGLE).is_file():
        files = [SINGLE]
    else:
        return None
    out = TensorBytes()
    for f in files:
        _add(out, folder / f)
    return out
