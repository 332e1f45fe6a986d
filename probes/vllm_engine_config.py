"""Probe: the serving defaults a vLLM release resolves for `vllm serve`, per accelerator and model, without a GPU
(issue 44).

One case runs probes/_vllm_engine_config.py under the interpreter that has vLLM (KB_VLLM_PYTHON, else this one).
It builds vLLM's own `EngineArgs(...).create_engine_config(UsageContext.OPENAI_API_SERVER)` for each point, with
vLLM's platform answering the accelerator's recorded total memory (`memory_bytes`), device name (its first
`device_names` entry, else its name) and compute capability (its architecture's), and keeps what the resolved
config holds: max_num_batched_tokens, max_num_seqs, block size, gpu_memory_utilization, async scheduling, chunked
prefill, prefix caching and the Mamba cache mode, the CUDA-graph mode and capture sizes, the model runner, the model
dtype a KV cache `auto` follows, and the extensible KV cache with its margins where the release has one.

The grid: every NVIDIA accelerator record (vLLM's batch defaults read the device's memory and name,
vllm/engine/arg_utils.py get_batch_defaults) with one dense model, and three accelerators (one per memory tier of
0.33.0's rule) with one model of each class kb sizes differently (dense fp8, sliding window + multimodal, hybrid
GDN, hybrid Mamba, MLA, attention sinks), each from its published config.json (tests/data/hf-configs). AMD
accelerators are left out: the CPU platform stand-in is vLLM's CUDA platform.

The raw grid goes to tests/data/vllm/<version>/engine-config.json.gz (KB_VLLM_RAW_DIR overrides the folder);
tests/solve/engines/vllm/test_engine_release.py replays every point against kb's records/engine-releases in CI.
There are no claims to judge: what the probe records is data for those records.
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
from pathlib import Path
from typing import Any

from kbtool.probe.spec import ProbeSpec

ROOT = Path(__file__).resolve().parents[1]
HELPER = Path(__file__).with_name("_vllm_engine_config.py")
PYTHON_ENV = "KB_VLLM_PYTHON"
RAW_DIR_ENV = "KB_VLLM_RAW_DIR"
RAW_NAME = "engine-config.json.gz"
MAX_MODEL_LEN = 32768
DENSE = "qwen3-8b"
CLASSES = ["qwen3-32b-fp8", "gemma-3-27b", "qwen3-next-80b-a3b", "nemotron-3-nano-30b-a3b", "deepseek-v3",
           "gpt-oss-20b"]
TIERS = ["nvidia-l40s", "nvidia-h100-sxm", "nvidia-b200"]  # < 70 GiB, 70-160 GiB, >= 160 GiB

SPEC = ProbeSpec(
    id="vllm-engine-config",
    version=1,
    order=7,
    title="vLLM serving defaults per accelerator and model, through vLLM's own config resolution (no GPU)",
    claims=[],
    requires={"gpu": False, "packages": ["vllm"]},
    timeout_s=1500,
    untestable="The vLLM engine-config probe needs vLLM installed (KB_VLLM_PYTHON).",
)


def _records() -> Path:
    from kbtool.paths import records_dir

    return records_dir()


def accelerators(records: Path | None = None) -> list[dict[str, Any]]:
    """Every NVIDIA accelerator record with a memory figure: {id, memory_bytes, name, cc}."""
    records = records or _records()
    archs = {}
    for path in sorted((records / "architectures").glob("*.yaml")):
        rec = load_yaml_file(path)
        archs[rec["id"]] = rec.get("compute_capability")
    out = []
    for path in sorted((records / "accelerators").glob("*.yaml")):
        rec = load_yaml_file(path)
        mem = (rec.get("memory_bytes") or {}).get("value")
        cc = archs.get(rec.get("architecture"))
        if rec.get("vendor") != "nvidia" or not mem or not cc:
            continue
        names = [d["value"] for d in rec.get("device_names") or [] if d.get("value")]
        out.append({"id": rec["id"], "memory_bytes": int(mem), "name": names[0] if names else rec["name"],
                    "cc": str(cc)})
    return out


def load_yaml_file(path: Path) -> Any:
    import yaml

    return yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def points(records: Path | None = None) -> dict[str, Any]:
    accs = accelerators(records)
    configs = ROOT / "tests" / "data" / "hf-configs"
    models = [{"id": m, "dir": str(configs / m), "max_model_len": MAX_MODEL_LEN} for m in [DENSE, *CLASSES]]
    return {"accelerators": accs, "models": models,
            "pairs": [[a["id"], DENSE] for a in accs] + [[t, m] for t in TIERS for m in CLASSES]}


def cases() -> list[dict[str, Any]]:
    return [{"name": "serve-defaults", "max_model_len": MAX_MODEL_LEN}]


def raw_dir() -> Path:
    return Path(os.environ.get(RAW_DIR_ENV) or ROOT / "tests" / "data" / "vllm")


def run(case: dict[str, Any]) -> dict[str, Any]:
    python = os.environ.get(PYTHON_ENV) or sys.executable
    start = time.monotonic()
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="kb-vllm-config-") as tmp:
        spec, out = Path(tmp) / "points.json", Path(tmp) / "grid.json.gz"
        spec.write_text(json.dumps(points()))
        proc = subprocess.run([python, str(HELPER), str(out), str(spec)], capture_output=True, text=True, env=env,
                              timeout=SPEC.timeout_s - 30, check=False)
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
            return {"outcome": "ERROR", "message": " | ".join(tail)[-1000:]}
        doc = load(out)
        dest = raw_dir() / str(doc["vllm"]) / RAW_NAME
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, dest)
    rows = doc["rows"]
    errors = [r for r in rows if "error" in r["resolved"]]
    metrics: dict[str, Any] = {
        "vllm": doc["vllm"], "points": len(rows), "errors": len(errors),
        "raw": str(dest.relative_to(ROOT)) if dest.is_relative_to(ROOT) else str(dest),
        "sha256": hashlib.sha256(dest.read_bytes()).hexdigest(), "release": doc["release"],
        "batch_defaults": sorted({f"{r['resolved'].get('max_num_batched_tokens')}/{r['resolved'].get('max_num_seqs')}"
                                  for r in rows if "error" not in r["resolved"]}),
        "grid_seconds": doc.get("seconds"),
    }
    return {"outcome": "OK", "seconds": round(time.monotonic() - start, 1), "metrics": metrics}


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    return []  # no claims: the grid is data for records/engine-releases, replayed by a CI test
