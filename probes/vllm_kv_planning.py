"""Probe: vLLM's own KV-cache planning and start-up check, run on a CPU over every recorded model (issue 44).

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_kv_planning.py.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kbtool.probe.judges.vllm_kv_planning import SPEC, judge, points, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


ROOT = Path(__file__).resolve().parents[1]


HELPER = Path(__file__).with_name("_vllm_kv_planning.py")


PYTHON_ENV = "KB_VLLM_PYTHON"


RAW_DIR_ENV = "KB_VLLM_RAW_DIR"


RAW_NAME = "kv-planning.json.gz"


MARK = "KB-KVPLAN "


# Every recorded model at its own dtype, tensor parallel 1 and kb's block; then the layouts of issue 44 once more:
# fp8 KV, fp32 KV (--dtype float32: kv_cache_dtype auto follows the model), tensor parallel (chunked local
# attention under TP: Llama-4), and block 64 (vLLM 0.34.0's default). vLLM's planning takes ~0.4 s a point on a
# CPU, so the grid is kept to about 1,500 points a release.
EXTRA: dict[str, list[tuple[str, int, int | None]]] = {  # model -> [(kv, tp, block or None for kb's)]
    "llama-3.1-8b": [("fp8", 1, None), ("fp32", 1, None), ("bf16", 1, 64)],
    "llama-3.1-70b": [("bf16", 2, None), ("fp8", 4, None)],
    "gemma-3-27b": [("fp8", 1, None), ("bf16", 2, None), ("fp32", 1, None), ("bf16", 1, 64)],
    "gpt-oss-120b": [("bf16", 1, 64), ("bf16", 2, None)],
    "llama-4-scout-17b-16e": [("bf16", 4, None), ("bf16", 8, None), ("bf16", 1, 64)],
    "llama-4-maverick-17b-128e": [("bf16", 8, None)],
    "deepseek-v3": [("fp8", 1, None), ("bf16", 8, None)],
    "deepseek-v3.2": [("bf16", 8, None), ("fp8", 8, None)],  # sparse MLA: latent + indexer key cache (issue 44)
    "glm-5": [("bf16", 8, None), ("fp8", 8, None)],
    "qwen3-next-80b-a3b": [("bf16", 2, None), ("bf16", 4, None), ("fp8", 1, None)],
    "nemotron-h-56b": [("bf16", 2, None)],
    "qwen3-8b": [("fp32", 1, None)],
}


def cases() -> list[dict[str, Any]]:
    return [{"name": "recorded-models"}]


def raw_dir() -> Path:
    return Path(os.environ.get(RAW_DIR_ENV) or ROOT / "tests" / "data" / "vllm")


def model_cases() -> list[dict[str, Any]]:
    """One planning case per (model, KV dtype, tensor parallel, block) kb can describe, with its grid points."""
    from kbtool.query_cli import image
    from kbtool.solve.engines.vllm import pool as vllm_pool
    from kbtool.solve.engines.vllm.kvcache import kv_model

    img = image()
    out = []
    for mid in sorted(set(img.names("model").values())):
        model = img.model(mid)
        base = "fp32" if model.weight_dtype == "fp32" else "bf16"
        for kv, tp, block in [(base, 1, None), *EXTRA.get(mid, [])]:
            try:  # kb's block for the model where none is named: 16, or FlashMLA's 64 for MLA (kvcache.py)
                own = kv_model(model, kv, tp, batched_tokens=8192).block  # the block does not depend on it
            except (AssertionError, KeyError):
                continue
            spec = vllm_pool.specs(model, kv, block or own, tp)
            if spec is None:
                continue
            out.append({"model": mid, "kv": kv, "tp": tp, "architecture": model.architecture, **spec,
                        "points": points(spec, model.max_context)})
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    python = os.environ.get(PYTHON_ENV) or sys.executable
    start = time.monotonic()
    models = model_cases()
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="kb-vllm-kvplan-") as tmp:
        src = Path(tmp) / "cases.json"
        src.write_text(json.dumps({"cases": models}))
        proc = subprocess.run([python, str(HELPER), f"@{src}"], capture_output=True, text=True, env=env,
                              cwd=HELPER.parent, timeout=SPEC.timeout_s - 60, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        return {"outcome": "ERROR", "message": " | ".join(tail)[-1000:]}
    doc = json.loads(lines[-1][len(MARK):])
    dest = raw_dir() / str(doc["vllm"]) / RAW_NAME
    dest.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    if not dest.exists() or load(dest) != doc:  # a release run again leaves an identical file byte for byte
        with gzip.GzipFile(dest, "wb", mtime=0) as fh:
            fh.write(body)
    pts = [p for c in doc["cases"] for p in c["points"]]
    metrics = {
        "vllm": doc["vllm"], "models": len({c["model"] for c in doc["cases"]}), "configurations": len(doc["cases"]),
        "points": len(pts), "starts": sum(1 for p in pts if p.get("starts") is True),
        "refuses": sum(1 for p in pts if p.get("starts") is False),
        "exceptions": sum(1 for p in pts if "exception" in p), "planning": doc.get("planning"),
        "raw": str(dest.relative_to(ROOT)) if dest.is_relative_to(ROOT) else str(dest),
        "sha256": hashlib.sha256(dest.read_bytes()).hexdigest(), "helper_seconds": doc.get("seconds"),
    }
    return {"outcome": "OK", "seconds": round(time.monotonic() - start, 1), "metrics": metrics}


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]
