"""Probe: SGLang's own launch defaults and KV pool planning per recorded accelerator and model, without a GPU
(issue 44).

One case per group of recorded NVIDIA accelerators. `run` writes the accelerators (the device name CUDA reports,
kb's capacity in MiB, compute capability, SM count: from the accelerator and architecture records), the recorded
models (their published config.json, tests/data/hf-configs/<id>/config.json), the launch lines (VARIANTS) and the
available-memory fractions (FRACTIONS) to a JSON file, and starts probes/_sglang_pool.py under the interpreter that
has SGLang (KB_SGLANG_PYTHON, else this one). That worker presents each accelerator to SGLang, resolves each launch
line through SGLang's ServerArgs and runs SGLang's KVCacheConfigurator on it (see its docstring): the defaults
SGLang resolves, and per available-memory point the pool it plans (max_total_num_tokens, max_running_requests, the
full / SWA split, Mamba state slots) or the error it raises at start-up, exact text. The document goes to
tests/data/sglang/<release>/pool-<group>.json.gz (KB_SGLANG_RAW_DIR overrides the folder), named in the evidence
with its sha256.

No claim is judged: the recording is replayed by tests/solve/test_sglang_pool_replay.py through kb's SGLang engine
(kbtool/solve/engines/sglang/plan.py), which must agree at every point. summarize() reports that agreement.
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

from kbtool.probe.spec import ProbeSpec

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("_sglang_pool.py")
HF_CONFIGS = ROOT / "tests" / "data" / "hf-configs"
PYTHON_ENV = "KB_SGLANG_PYTHON"
RAW_DIR_ENV = "KB_SGLANG_RAW_DIR"
# launch lines after `--model-path M --skip-tokenizer-init --device cuda`
VARIANTS: list[list[str]] = [[], ["--kv-cache-dtype", "fp8_e4m3"], ["--context-length", "32768"]]
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
    "defaults": (ALL_NVIDIA, ["llama-3.1-8b", "deepseek-v3", "qwen3-next-80b-a3b"], [0]),
    "models": (["nvidia-h100-sxm"], None, [0]),
    "classes": (["nvidia-h200-sxm", "nvidia-l40s"], CLASSES, [0, 1, 2]),
}

SPEC = ProbeSpec(
    id="sglang-pool",
    version=1,
    order=7,
    title="SGLang launch defaults and KV pool planning per accelerator (no GPU)",
    claims=[],
    requires={"gpu": False, "packages": ["sglang"]},
    timeout_s=3000,
    untestable="The sglang-pool probe needs SGLang installed (KB_SGLANG_PYTHON, tests/data/sglang/README.md).",
)


def cases() -> list[dict[str, Any]]:
    return [{"group": g} for g in GROUPS]


def raw_dir() -> Path:
    return Path(os.environ.get(RAW_DIR_ENV) or ROOT / "tests" / "data" / "sglang")


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
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
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


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    return []  # no claim: the recording is replayed by tests/solve/test_sglang_pool_replay.py
