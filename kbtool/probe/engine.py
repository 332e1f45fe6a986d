"""Engine probes: probes of a serving engine's own Python gates, which need no GPU (design.md §5).

An engine probe declares `requires={"gpu": False, ...}`. It runs where `kb probe run` finds no GPU, in an
environment that names the engine instead of a GPU: the engine's interpreter (`KB_VLLM_PYTHON`, else this
one) reports the vLLM and torch versions, and those versions are the scope its verdicts cover.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from typing import Any

from kbtool.probe.spec import ProbeSpec

PYTHON_ENV = "KB_VLLM_PYTHON"
_VERSIONS = (
    "import json, importlib.metadata as m\n"
    "out = {}\n"
    "for d in ('vllm', 'torch', 'flashinfer-python', 'triton'):\n"
    "    try:\n"
    "        out[d] = m.version(d)\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "import platform; out['python'] = platform.python_version()\n"
    "print(json.dumps(out))\n"
)


def needs_gpu(spec: ProbeSpec) -> bool:
    return spec.requires.get("gpu", True) is not False


def engine_python() -> str:
    """The interpreter that has the engine installed."""
    return os.environ.get(PYTHON_ENV) or sys.executable


def environment(base: dict[str, Any], python: str | None = None) -> dict[str, Any]:
    """The fingerprint an engine probe runs under: no GPU, the engine interpreter's package versions."""
    exe = python or engine_python()
    try:
        proc = subprocess.run([exe, "-c", _VERSIONS], capture_output=True, text=True, timeout=60, check=False)
        found: dict[str, str] = json.loads(proc.stdout) if proc.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        found = {}
    libs = {("flashinfer" if k == "flashinfer-python" else k): v for k, v in found.items()
            if k not in ("torch", "python")}
    env = {k: v for k, v in base.items() if k not in ("reason",)}
    env.update({
        "gpu": f"no GPU (vllm {libs.get('vllm', 'not installed')})",
        "compute_capability": "n/a",
        "architecture": None,
        "accelerator": None,
        "torch": found.get("torch"),
        "python": found.get("python") or platform.python_version(),
        "libraries": libs,
        "engine_python": exe,
    })
    return env
