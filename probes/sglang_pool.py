"""Probe: SGLang's own launch defaults and KV pool planning per recorded accelerator and model, without a GPU.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/sglang_pool.py.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kbtool.probe.judges.sglang_pool import ROOT, SPEC, judge, load, summarize
from probes._sglang_grid import worker_env

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


WORKER = Path(__file__).with_name("_sglang_pool.py")


HF_CONFIGS = ROOT / "tests" / "data" / "hf-configs"


PYTHON_ENV = "KB_SGLANG_PYTHON"


RAW_DIR_ENV = "KB_SGLANG_RAW_DIR"


# launch lines after `--model-path M --skip-tokenizer-init --device cuda`
VARIANTS: list[list[str]] = [[], ["--kv-cache-dtype", "fp8_e4m3"], ["--context-length", "32768"],
                              ["--mem-fraction-static", "0.9", "--max-running-requests", "48"],
                              ["--page-size", "64", "--max-total-tokens", "200000"]]


# free memory after the weights load, as a fraction of the memory free before it
FRACTIONS = [0.02, 0.08, 0.12, 0.15, 0.17, 0.19, 0.22, 0.3, 0.45, 0.6, 0.8, 0.95]


ALL_NVIDIA = ["nvidia-a10", "nvidia-a10g", "nvidia-a100-40gb-sxm", "nvidia-a100-80gb-pcie", "nvidia-a100-80gb-sxm",
              "nvidia-a800-80gb-sxm", "nvidia-b200", "nvidia-b300", "nvidia-gb10", "nvidia-gb200", "nvidia-gb300",
              "nvidia-gh200", "nvidia-h100-nvl", "nvidia-h100-pcie", "nvidia-h100-sxm", "nvidia-h20-141gb",
              "nvidia-h20", "nvidia-h200-nvl", "nvidia-h200-sxm", "nvidia-h800", "nvidia-l20", "nvidia-l4",
              "nvidia-l40", "nvidia-l40s", "nvidia-rtx-3090", "nvidia-rtx-4090", "nvidia-rtx-5090",
              "nvidia-rtx-pro-6000-blackwell", "nvidia-t4"]


CLASSES = ["llama-3.1-8b", "qwen3-32b", "deepseek-v3", "deepseek-v3.2", "gemma-3-27b", "llama-4-scout-17b-16e",
           "qwen3-next-80b-a3b", "nemotron-h-56b"]  # dense, dense, MLA, DSA, sliding window, chunked, GDN, Mamba


# (accelerators, models or None for every recorded model, variant indices) per case: SGLang imports once per case
GROUPS: dict[str, tuple[list[str], list[str] | None, list[int]]] = {
    "defaults": (ALL_NVIDIA, CLASSES, [0]),
    "models": (["nvidia-h100-sxm"], None, [0, 1, 2, 3, 4]),
    "classes": (["nvidia-h200-sxm", "nvidia-b200", "nvidia-l40s", "nvidia-rtx-5090"], CLASSES, [0, 1, 2, 3, 4]),
}


def cases() -> list[dict[str, Any]]:
    return [{"group": g} for g in GROUPS]


def raw_dir() -> Path:
    return Path(os.environ.get(RAW_DIR_ENV) or ROOT / "tests" / "data" / "sglang")


def models() -> dict[str, Any]:
    return {p.name: json.loads((p / "config.json").read_text()) for p in sorted(HF_CONFIGS.iterdir())
            if (p / "config.json").exists()}


def run(case: dict[str, Any]) -> dict[str, Any]:
    python = os.environ.get(PYTHON_ENV) or sys.executable
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kb-sglang-pool-") as tmp:
        inp, out = Path(tmp) / "in.json", Path(tmp) / "pool.json.gz"
        accs, names, variants = GROUPS[case["group"]]
        ms = {k: v for k, v in models().items() if names is None or k in names}
        inp.write_text(json.dumps({"accelerators": accelerators(accs), "models": ms,
                                   "variants": [VARIANTS[i] for i in variants], "fractions": FRACTIONS}))
        env = worker_env()  # the environment the resolve grid's workers run under (probes/_sglang_grid.py)
        proc = subprocess.run([python, str(WORKER), str(inp), str(out)], capture_output=True, text=True, env=env,
                              timeout=SPEC.timeout_s - 30, check=False)
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
            return {"outcome": "ERROR", "message": " | ".join(tail)[-1000:]}
        with gzip.open(out, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
        dest = raw_dir() / str(doc["sglang"]) / f"pool-{case['group']}.json.gz"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, dest)
    kinds: Counter[str] = Counter()
    for _a, _m, _v, d, pools in doc["rows"]:
        if "error" in d:
            kinds["unresolved: " + d["error"]] += 1
            continue
        for p in pools:
            kinds[p.get("error", "planned")] += 1
    return {"outcome": "OK", "seconds": round(time.monotonic() - start, 1), "metrics": {
        "sglang": doc["sglang"], "torch": doc.get("torch"), "python": doc.get("python"), "group": case["group"],
        "accelerators": len(doc["accelerators"]), "models": len(doc["models"]), "rows": len(doc["rows"]),
        "points": sum(len(r[4]) for r in doc["rows"]), "by_kind": dict(sorted(kinds.items())),
        "raw": str(dest.relative_to(ROOT)) if dest.is_relative_to(ROOT) else str(dest),
        "sha256": hashlib.sha256(dest.read_bytes()).hexdigest(), "worker_seconds": doc.get("seconds")}}


def recorded(release: str, folder: Path | None = None) -> list[dict[str, Any]]:
    return [load(p) for p in sorted(((folder or raw_dir()) / release).glob("pool-*.json.gz"))]


def accelerators(ids: list[str]) -> dict[str, dict[str, Any]]:
    """The device each accelerator record presents: CUDA's name for it, kb's capacity (MiB), cc, SMs."""
    from kbtool.kb import load_kb
    from kbtool.paths import records_dir

    kb = load_kb(records_dir())[0]
    out = {}
    for i in ids:
        a = kb.get(i)
        if a is None or a.capacity_bytes() is None:
            continue
        arch = kb.get(a.architecture)
        cc = str(arch.compute_capability)
        name = a.device_names[0].value if a.device_names else a.name
        out[i] = {"name": name, "memory_mib": a.capacity_bytes() / 2**20,
                  "capability": [int(x) for x in cc.split(".")],
                  "sms": int(a.sm_count.value) if a.sm_count is not None else 100}
    return out
