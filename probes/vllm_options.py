"""Probe: vLLM engine options as vLLM's own argument parser and config classes read them, without a GPU.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_options.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kbtool.probe.judges.vllm_options import CLAIM, FA_WANT, MISALIGNED, ONLY_576, SPEC, judge

__all__ = ['SPEC', 'cases', 'judge', 'run']


HELPER = Path(__file__).with_name("_vllm_options.py")


PYTHON_ENV = "KB_VLLM_PYTHON"


MARK = "KB-OPTIONS "


SKIP = {"cache_dtype": "kv_cache_dtype", "kv_cache_dtype_skip_layers": "kv_cache_dtype_skip_layers"}


def cases() -> list[dict[str, Any]]:
    return [
        {"name": "skip-sliding-window", "claim": CLAIM,
         "argv": ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-layers", "sliding_window"],
         "fields": ["kv_cache_dtype", "kv_cache_dtype_skip_layers"], "cache_config": SKIP,
         "cache_config_read": list(SKIP), "expect": {"kv_cache_dtype_skip_layers": ["sliding_window"]}},
        {"name": "control-unknown-flag", "claim": None,
         "argv": ["--kv-cache-dtype", "fp8", "--kv-cache-dtype-skip-windowed-layers", "sliding_window"],
         "fields": ["kv_cache_dtype"], "cache_config": {"cache_dtype": "kv_cache_dtype"},
         "cache_config_read": ["cache_dtype"], "expect": None},
        {"name": "head-sizes", "backends": [*ONLY_576.values(), "FLEX_ATTENTION"],
         "head_sizes": [*MISALIGNED, 320, 512, 576]},
        {"name": "fa-version", "fa_cc": "10.0", "head_sizes": [int(h) for h in FA_WANT]},
    ]


def run(case: dict[str, Any]) -> dict[str, Any]:
    python = os.environ.get(PYTHON_ENV) or sys.executable
    start = time.monotonic()
    keys = next((k for k in (("fa_cc", "head_sizes"), ("backends", "head_sizes")) if k[0] in case),
                ("argv", "fields", "cache_config", "cache_config_read"))
    payload = {k: case[k] for k in keys}
    proc = subprocess.run([python, str(HELPER), json.dumps(payload)], capture_output=True, text=True,
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES=""), cwd=HELPER.parent,
                          timeout=SPEC.timeout_s - 30, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        return {"outcome": "ERROR", "message": " | ".join(tail)[-1000:]}
    got = json.loads(lines[-1][len(MARK):])
    if "backends" in case or "fa_cc" in case:
        return {"outcome": "OK", "seconds": round(time.monotonic() - start, 1), "metrics": got}
    return {"outcome": "OK" if got.get("parsed") else "UNSUPPORTED", "message": got.get("error"),
            "seconds": round(time.monotonic() - start, 1), "metrics": got}
