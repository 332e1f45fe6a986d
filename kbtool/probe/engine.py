"""Engine probes: probes of a serving engine's own Python gates, which need no GPU (design.md §5).

An engine probe declares `requires={"gpu": False, "packages": [ENGINE, ...]}`. It runs where `kb probe run`
finds no GPU, in an environment that names the engine instead of a GPU: the engine's interpreter
(`KB_VLLM_PYTHON` for vLLM, `KB_SGLANG_PYTHON` for SGLang, else this one) reports the engine's and torch's
versions, and those versions are the scope its verdicts cover.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from typing import Any

from kbtool.probe.spec import ProbeSpec

ENGINES = {"vllm": "KB_VLLM_PYTHON", "sglang": "KB_SGLANG_PYTHON"}
"""Engine distribution -> the variable naming the interpreter that has it installed."""
PYTHON_ENV = ENGINES["vllm"]
_VERSIONS = (
    "import json, importlib.metadata as m\n"
    "out = {}\n"
    "for d in ('vllm', 'sglang', 'torch', 'flashinfer-python', 'triton'):\n"
    "    try:\n"
    "        out[d] = m.version(d)\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "import platform; out['python'] = platform.python_version()\n"
    "print(json.dumps(out))\n"
)


def needs_gpu(spec: ProbeSpec) -> bool:
    return spec.requires.get("gpu", True) is not False


def engine_of(spec: ProbeSpec | None) -> str:
    """The engine an engine probe exercises: the first of its packages that is an engine (vLLM by default)."""
    for p in spec.packages if spec is not None else []:
        if p in ENGINES:
            return p
    return "vllm"


def engine_python(engine: str = "vllm") -> str:
    """The interpreter that has the engine installed."""
    return os.environ.get(ENGINES.get(engine, PYTHON_ENV)) or sys.executable


def environment(base: dict[str, Any], python: str | None = None, spec: ProbeSpec | None = None) -> dict[str, Any]:
    """The fingerprint an engine probe runs under: no GPU, the engine interpreter's package versions."""
    engine = engine_of(spec)
    exe = python or engine_python(engine)
    try:
        proc = subprocess.run([exe, "-c", _VERSIONS], capture_output=True, text=True, timeout=60, check=False)
        found: dict[str, str] = json.loads(proc.stdout) if proc.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        found = {}
    libs = {("flashinfer" if k == "flashinfer-python" else k): v for k, v in found.items()
            if k not in ("torch", "python")}
    env = {k: v for k, v in base.items() if k not in ("reason",)}
    overrides = install_overrides(exe)
    if overrides:
        env["install_overrides"] = overrides
    env.update({
        "gpu": f"no GPU ({engine} {libs.get(engine, 'not installed')})",
        "compute_capability": "n/a",
        "architecture": None,
        "accelerator": None,
        "torch": found.get("torch"),
        "python": found.get("python") or platform.python_version(),
        "libraries": libs,
        "engine_python": exe,
    })
    return env


def install_overrides(python: str) -> list[str]:
    """The overrides `kb probe sweep` installed the interpreter's environment with (its kb-install.json, written
    by kbtool/probe/sweep.py beside bin/): requirements that replaced the release's own pins."""
    from pathlib import Path

    note = Path(python).parent.parent / "kb-install.json"
    try:
        data = json.loads(note.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found = data.get("overrides") if isinstance(data, dict) else None
    return [str(x) for x in found] if isinstance(found, list) else []
