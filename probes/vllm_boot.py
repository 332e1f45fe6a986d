"""Probe: boot vLLM for real with dummy weights and record the memory numbers it reports (issue 25).

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/vllm_boot.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbtool.probe.judges.vllm_boot import HERE, SPEC, judge, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


KEEP = ("attention_backend", "attention_backends_all", "mla_prefill_backend", "flash_attn_version", "model_runner",
        "weights_gib", "activation_peak_gib", "non_torch_gib", "cudagraph_estimate_gib", "cudagraph_actual_gib",
        "requested_gib", "available_kv_gib", "block_size", "num_gpu_blocks", "kv_cache_tokens", "max_concurrency",
        "kv_cache_groups", "padding_lines", "kv_tokens_line", "concurrency_line", "graph_capture_s",
        "held_before_snapshot_gib", "module_tensors_gib", "cudagraph_profile", "encoder_profile")


def cases() -> list[dict[str, Any]]:
    """The cases of probes/vllm_boot/cases.json, from the KB_BOOT_FROM-th (1-based; a later call resumes), or those
    KB_BOOT_ONLY names (comma-separated ids, in that order)."""
    import os

    out: list[dict[str, Any]] = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))
    out = out[max(0, int(os.environ.get("KB_BOOT_FROM", "1")) - 1):]
    only = [x for x in os.environ.get("KB_BOOT_ONLY", "").split(",") if x]
    if only:
        out = sorted((c for c in out if c.get("id") in only), key=lambda c: only.index(c["id"]))
    for c in out:
        c.pop("est_s", None)
        c.pop("why", None)
    return out


def gpu_busy() -> int:
    """How many compute processes hold the GPU now (nvidia-smi; 0 where it cannot tell)."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.strip())


def wait_for_gpu(limit_s: float = 90.0, step_s: float = 3.0, busy: Any = gpu_busy, sleep: Any = None) -> int:
    """Wait until no process holds the GPU, at most `limit_s`; how many still hold it. A case whose worker was killed
    (a timeout, or the run's budget) leaves its engine core freeing memory for a while: the next case started at
    once saw "Free memory on device ... is less than desired" (2026-12-07, not applied as evidence)."""
    import time

    sleep = sleep or time.sleep
    waited = 0.0
    while (n := busy()) and waited < limit_s:
        sleep(step_s)
        waited += step_s
    return n


def run(case: dict[str, Any]) -> dict[str, Any]:
    import sys
    import tempfile

    from probes._group import run_in_group

    held = wait_for_gpu()
    if held:
        return {"outcome": "ERROR", "message": f"the GPU is still held by {held} process(es) from before this case "
                "(waited 90 s): not a boot of this case"}

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        limit = float(case.get("timeout_s") or SPEC.timeout_s) - 10
        # its own session: at the deadline, and after it exits, the engine core it started goes with it
        code, tail, killed = run_in_group([sys.executable, str(HERE / "boot_case.py"), json.dumps(case), str(out)],
                                          limit)
        if killed:
            return {"outcome": "TIMEOUT", "message": f"vLLM did not finish booting within {limit:.0f} s"}
        if not out.is_file():
            return {"outcome": "ERROR", "message": f"boot_case.py wrote nothing (exit {code}): {tail[-600:]}"}
        rec = json.loads(out.read_text(encoding="utf-8"))
    summary = rec.get("summary") or {}
    metrics = {k: summary.get(k) for k in KEEP}
    metrics.update(release=rec.get("release"), flags=rec.get("flags"), boot_s=rec.get("boot_s"),
                   config_patch=rec.get("config_patch"),
                   weights_gib_source=summary.get("weights_gib_source"),
                   available_kv_gib_source=summary.get("available_kv_gib_source"))
    if rec.get("outcome") == "OK":
        return {"outcome": "OK", "metrics": metrics}
    exc = rec.get("exception") or {}
    outcome = "OOM" if rec.get("outcome") == "OOM" else "ERROR"
    metrics["last_log_lines"] = (rec.get("last_log_lines") or [])[-12:]
    return {"outcome": outcome, "message": f"{exc.get('type')}: {str(exc.get('message'))[-800:]}",
            "metrics": metrics}
