"""Pack several FlashInfer releases into one de-duplicated bundle for the GPU host (one device call carries at
most 64 MiB; five releases' wheels are 220 MB, their unpacked trees 1.4 GB).

    python3 probes/fi_sweep/pack.py WORK RELEASE ...      -> WORK/fi-sweep.tar.xz

Each release's wheel is downloaded (pip download --no-deps) and unpacked; what an sm90 attention probe never
compiles is left out (the CUDA sources of MoE, GEMM, linear-attention and Blackwell-only kernels under
flashinfer/data/csrc/<subdir>, and the prebuilt data of flashinfer/experimental; the top-level csrc files, the
headers and every Python file stay); identical files are stored once (by sha1), with a manifest that
probes/fi_sweep/restore.py turns back into one site folder per release."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

DROP = ["kda", "gdn", "experimental", "fused_moe", "cake_*", "blackwell_*", "alphamoe_router", "bgmv_moe",
        "cute_sm12x_gemm", "nvfp4_attention_sm120", "sparse_mla_sm120", "mhc", "gated_act_mxfp8"]


def _kept(rel: str) -> bool:
    parts = rel.split("/")
    if rel.startswith("flashinfer/data/csrc/") and len(parts) > 4:
        return not any(fnmatch.fnmatch(parts[3], d) for d in DROP)
    return not (rel.startswith("flashinfer/experimental/") and not rel.endswith(".py"))


def main() -> int:
    work, *releases = sys.argv[1:]
    dl, blob = Path(work) / "dl", Path(work) / "blob"
    dl.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(blob, ignore_errors=True)
    blob.mkdir()
    manifest: dict[str, list[list[object]]] = {}
    for release in releases:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dl),
                        f"flashinfer-python=={release}"], check=True)
        wheel = next(dl.glob(f"flashinfer_python-{release}-*.whl"))
        entries = manifest[release] = []
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                if info.is_dir() or not _kept(info.filename):
                    continue
                data = z.read(info)
                sha = hashlib.sha1(data).hexdigest()
                if not (blob / sha).exists():
                    (blob / sha).write_bytes(data)
                entries.append([info.filename, sha, (info.external_attr >> 16) & 0o777 or 0o644])
    (blob / "manifest.json").write_text(json.dumps(manifest))
    out = Path(work) / "fi-sweep.tar.xz"
    with open(out, "wb") as f:
        tar = subprocess.Popen(["tar", "cf", "-", "-C", work, "blob"], stdout=subprocess.PIPE)
        subprocess.run(["xz", "-T2", "-6"], stdin=tar.stdout, stdout=f, check=True)
        tar.wait()
    print(f"{out}: {os.path.getsize(out) / 1e6:.1f} MB for {', '.join(releases)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
