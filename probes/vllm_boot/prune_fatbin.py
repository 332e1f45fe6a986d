"""Zero the device code that an sm_90 GPU never loads, in place, inside CUDA shared objects.

usage: python3 prune_fatbin.py [--arch 90] [--list] FILE.so ...

A CUDA shared object carries its kernels in the ELF section .nv_fatbin: a run of fatbins (header magic
0xBA55ED50), each a list of entries (kind 1 = PTX, 2 = cubin) tagged with the SM version they are built for.
vLLM's wheel carries cubins for sm_75 ... sm_120 (about 85 % of _C's and _moe_C's fatbin bytes), which xz cannot
shrink: they are zstd-compressed already. This script leaves every header, offset and size as it is and
overwrites with zeros only the payload of entries the target GPU never selects:
  - in a fatbin that has a cubin for the target arch, every other entry (the driver takes the exact cubin);
  - in a fatbin without one, the cubins of other archs and the PTX newer than the target (PTX at or below the
    target arch is kept: the driver JIT-compiles it, as it would have without pruning).
The zeroed bytes compress to nothing; the file keeps its size. Layout (fat header 16 bytes; entry header:
u16 kind, u16, u32 header_size, u64 payload_size, ..., u32 arch at +28) as read by cuobjdump-compatible tools.
"""

import argparse
import struct
import sys
from pathlib import Path

MAGIC = 0xBA55ED50


def nv_fatbin(data):
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)

    strtab = header(e_shstrndx)[4]
    for i in range(e_shnum):
        h = header(i)
        name = bytes(data[strtab + h[0] : data.index(b"\0", strtab + h[0])])
        if name == b".nv_fatbin":
            return h[4], h[5]
    return None


def fatbins(data, off, size):
    pos, end = off, off + size
    while pos + 16 <= end:
        magic, _ver, hsize, fsize = struct.unpack_from("<IHHQ", data, pos)
        if magic != MAGIC:
            pos += 8
            continue
        entries, e = [], pos + hsize
        while e < pos + hsize + fsize:
            kind, _u, ehsize, psize = struct.unpack_from("<HHIQ", data, e)
            (arch,) = struct.unpack_from("<I", data, e + 28)
            entries.append((kind, arch, e + ehsize, psize))
            e += ehsize + psize
        yield entries
        pos = (pos + hsize + fsize + 7) & ~7


def prune(path, arch, list_only):
    data = bytearray(Path(path).read_bytes())
    if data[:4] != b"\x7fELF":
        return 0
    sec = nv_fatbin(data)
    if sec is None:
        return 0
    zeroed = kept = 0
    for entries in fatbins(data, *sec):
        has_cubin = any(k == 2 and a == arch for k, a, _, _ in entries)
        for kind, a, start, size in entries:
            keep = (kind == 2 and a == arch) or (not has_cubin and kind == 1 and a <= arch)
            if keep:
                kept += size
            else:
                zeroed += size
                if not list_only:
                    data[start : start + size] = bytes(size)
    if not list_only and zeroed:
        Path(path).write_bytes(data)
    print(f"{path}: fatbin {sec[1]} B, kept {kept} B, {'would zero' if list_only else 'zeroed'} {zeroed} B")
    return zeroed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    total = sum(prune(f, a.arch, a.list) for f in a.files)
    print(f"total {'would zero' if a.list else 'zeroed'}: {total} B", file=sys.stderr)


if __name__ == "__main__":
    main()
