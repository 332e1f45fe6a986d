"""Probe: SGLang's own server-argument resolution over a grid, without a GPU (issue 27): the program (cases and run).

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/sglang_resolve.py.
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

from kbtool.probe.judges.sglang_resolve import PLATFORMS, ROOT, SPEC, judge, load, summarize
from probes._sglang_grid import worker_env

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


GRID = Path(__file__).with_name("_sglang_grid.py")


RAW_DIR_ENV = "KB_SGLANG_RAW_DIR"


PYTHON_ENV = "KB_SGLANG_PYTHON"


MEMORY = ("mem_fraction_static", "chunked_prefill_size", "decode_graph_max_bs")


def cases() -> list[dict[str, Any]]:
    return [{"platform": p} for p in PLATFORMS]


def raw_dir() -> Path:
    return Path(os.environ.get(RAW_DIR_ENV) or ROOT / "tests" / "data" / "sglang")


def run(case: dict[str, Any]) -> dict[str, Any]:
    python = os.environ.get(PYTHON_ENV) or sys.executable
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kb-sglang-grid-") as tmp:
        out = Path(tmp) / "grid.json.gz"
        env = worker_env()  # what its workers run under, as the sglang-pool probe's worker does
        proc = subprocess.run([python, str(GRID), str(out), "--platform", case["platform"], "--jobs", "1"],
                              capture_output=True, text=True, env=env, timeout=SPEC.timeout_s - 30, check=False)
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
            return {"outcome": "ERROR", "message": " | ".join(tail)[-1000:]}
        doc = load(out)
        if doc.get("failures") or not doc["rows"]:
            text = " | ".join(str(v) for v in (doc.get("failures") or {}).values())
            return {"outcome": "ERROR", "message": ("the grid worker failed: " + text)[-1000:]}
        dest = raw_dir() / str(doc["sglang"]) / f"{case['platform']}.json.gz"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, dest)
    plat = doc["platforms"][case["platform"]]
    errors = Counter(str(doc["outcomes"][r[4]].get("error", "resolved")) for r in doc["rows"])
    return {"outcome": "OK", "seconds": round(time.monotonic() - start, 1), "metrics": {
        "sglang": doc["sglang"], "torch": doc.get("torch"), "python": doc.get("python"),
        "platform": case["platform"], "device": plat["name"], "capability": ".".join(map(str, plat["capability"])),
        "weaker": plat["weaker"], "grid_points": len(doc["rows"]), "outcomes": len(doc["outcomes"]),
        "by_kind": dict(sorted(errors.items())),
        "override_only_diffs": (plat.get("override_only_diffs") or {}).get("count"),
        "raw": str(dest.relative_to(ROOT)) if dest.is_relative_to(ROOT) else str(dest),
        "sha256": hashlib.sha256(dest.read_bytes()).hexdigest(), "grid_seconds": doc.get("seconds"),
    }}


def recorded(release: str, folder: Path | None = None) -> list[dict[str, Any]]:
    """The recorded grids of one release (one document per platform), in PLATFORMS order."""
    base = (folder or raw_dir()) / release
    found = {p.name.removesuffix(".json.gz"): p for p in base.glob("*.json.gz")
             if not p.name.startswith("pool-")}  # pool-*: the sglang-pool probe's recordings
    order = [p for p in PLATFORMS if p in found] + sorted(set(found) - set(PLATFORMS))
    return [load(found[p]) for p in order]


"""The key points() puts in place of the ServerArgs fields where kb's serve-line parser refused the argv."""
