"""Probe: vLLM's own attention-backend checks and priority lists over a grid, without a GPU (issue 18).

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_selector.py.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kbtool.probe.judges.vllm_selector import ROOT, SPEC, judge, judge_inputs, load, summarize
from kbtool.probe.recorded import keep_superseded

__all__ = ['SPEC', 'cases', 'judge', 'judge_inputs', 'run', 'summarize']


GRID = Path(__file__).with_name("_vllm_grid.py")


CCS = ["8.0", "8.6", "8.9", "9.0", "10.0", "12.0"]


RAW_DIR_ENV = "KB_VLLM_RAW_DIR"


PYTHON_ENV = "KB_VLLM_PYTHON"


def cases() -> list[dict[str, Any]]:
    return [{"cc": cc} for cc in CCS]


def raw_dir() -> Path:
    return Path(os.environ.get(RAW_DIR_ENV) or ROOT / "tests" / "data" / "vllm")


def run(case: dict[str, Any]) -> dict[str, Any]:
    return run_grid(GRID, ["--cc", case["cc"]], f"cc{case['cc']}.json.gz", SPEC.timeout_s - 30, accepted=True)


def run_grid(script: Path, args: list[str], name: str, timeout: float, *, accepted: bool) -> dict[str, Any]:
    """Run a grid script under vLLM's interpreter (KB_VLLM_PYTHON), keep its raw grid as raw_dir()/VERSION/name,
    and return the case's answer (the grid's size, digest and what it selects; `accepted` adds per-backend
    acceptance counts). probes/vllm_rocm_selector.py runs its ROCm grid through this too."""
    python = os.environ.get(PYTHON_ENV) or sys.executable
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kb-vllm-grid-") as tmp:
        out = Path(tmp) / "grid.json.gz"
        env = grid_env_vars()
        proc = subprocess.run([python, str(script), str(out), *args], capture_output=True, text=True,
                              env=env, timeout=timeout, check=False)
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
            return {"outcome": "ERROR", "message": " | ".join(tail)[-1000:]}
        doc = load(out)
        dest = raw_dir() / str(doc["vllm"]) / name
        keep_or_copy(out, dest)
    digest = hashlib.sha256(dest.read_bytes()).hexdigest()
    metrics: dict[str, Any] = {
        "vllm": doc["vllm"], "vllm_commit": doc.get("commit"), "torch": doc.get("torch"),
        "grid_points": len(doc["rows"]), "backends": len(doc["backends"]),
        "import_errors": sorted(doc.get("import_errors") or {}),
        "raw": str(dest.relative_to(ROOT)) if dest.is_relative_to(ROOT) else str(dest), "sha256": digest,
    }
    if accepted:
        metrics["accepted"] = accepted_counts(doc)
    metrics["selected"] = dict(Counter(str(r[8]) for r in doc["rows"]))
    metrics["grid_seconds"] = doc.get("seconds")
    return {"outcome": "OK", "seconds": round(time.monotonic() - start, 1), "metrics": metrics}


def grid_env_vars() -> dict[str, str]:
    """The grid's environment: no CUDA device, and bytecode written. A grid asks about modules that fail to import
    (ROCm backends, FlashInfer, cutlass-dsl) at every point; under PYTHONDONTWRITEBYTECODE=1 (common in container
    images) in an environment installed without byte-compiling, every retry compiled them from source again and
    one compute capability overran its limit (issue 46)."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def keep_or_copy(new: Path, dest: Path) -> None:
    """Copy a fresh grid to `dest`, unless `dest` already holds the same grid (rows, reasons, backends): a
    release run again (a sweep with --force) leaves its recorded file, and the tests that read it, byte for byte.
    A different grid there (a newer grid version) is kept first under its digest (superseded/<sha256>-<name>,
    kbtool.probe.recorded), where the evidence of the run that wrote it still reads it."""
    if dest.exists():
        try:
            old, fresh = load(dest), load(new)
        except (OSError, ValueError):
            old, fresh = {}, {"": None}
        same = ("vllm", "backends", "reasons", "reason_sets", "priorities", "rows")
        if all(old.get(k) == fresh.get(k) for k in same):
            return
        keep_superseded(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(new, dest)


def accepted_counts(doc: dict[str, Any]) -> dict[str, int]:
    empty = {i for i, s in enumerate(doc["reason_sets"]) if not s}
    counts: Counter[str] = Counter()
    for r in doc["rows"]:
        for n, s in zip(doc["backends"], r[10], strict=True):
            if s in empty:
                counts[n] += 1
    return dict(sorted(counts.items()))


"""2: a claim of the same backend and reason code (another release's version of the gate) explains no refusal;
4: except where both claims are scoped to the release (there the outcome is the verdict)"""
