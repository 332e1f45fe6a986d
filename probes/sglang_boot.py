"""Probe: boot SGLang for real with dummy weights and record the token pool it sizes (issue 27).

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/sglang_boot.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kbtool.probe.judges.sglang_boot import SPEC, judge, summarize

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


HERE = Path(__file__).resolve().parent / "sglang_boot"


KEEP = ("kv_tokens", "kv_dtype", "kv_layout", "kv_gb", "kv_pools", "pool_end_avail_gb", "max_total_num_tokens",
        "chunked_prefill_size", "max_prefill_tokens", "max_running_requests", "context_len", "available_gpu_mem_gb",
        "load_begin_avail_gb", "weights_gb", "load_end_avail_gb", "model_class", "quantization_log", "cuda_graphs",
        "cuda_graph_gb", "swa_full_tokens", "swa_tokens", "post_capture_tokens", "dist_init_gb", "attention_backend",
        "prefill_attention_backend", "decode_attention_backend", "mem_fraction_static", "page_size",
        "cuda_graph_max_bs_decode", "disable_cuda_graph", "server_kv_cache_dtype", "memory_usage")


def cases() -> list[dict[str, Any]]:
    """The cases of probes/sglang_boot/cases.json, from the KB_BOOT_FROM-th (1-based; a later call resumes), or
    those KB_BOOT_ONLY names (comma-separated ids, in that order)."""
    out: list[dict[str, Any]] = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))
    out = out[max(0, int(os.environ.get("KB_BOOT_FROM", "1")) - 1):]
    only = [x for x in os.environ.get("KB_BOOT_ONLY", "").split(",") if x]
    if only:
        out = sorted((c for c in out if c.get("id") in only), key=lambda c: only.index(c["id"]))
    if os.environ.get("KB_BOOT_RESUME") == "1":  # a later call on the same machine skips the boots already made
        done = set(done_file().read_text(encoding="utf-8").split()) if done_file().is_file() else set()
        out = [c for c in out if c.get("id") not in done]
    for c in out:
        c.pop("est_s", None)
        c.pop("why", None)
    return out


def done_file() -> Path:
    """Ids of the cases that ran to an outcome on this machine (KB_SGL_DONE, default /tmp/sgl-boot-done.txt):
    with KB_BOOT_RESUME=1 a second call, identical to the first, boots only the rest. A case the runner killed at
    the run's budget never got here, so it runs again."""
    return Path(os.environ.get("KB_SGL_DONE", "/tmp/sgl-boot-done.txt"))


def site_dir() -> Path:
    return Path(os.environ.get("KB_SGL_SITE", "/tmp/sgl-site"))


def ensure_bundle(site: Path, stash: Path | None = None) -> str | None:
    """Unpack the bundle into `site` once: from ~/stash/sglang-boot-*.tar.xz (host-run.sh joins split pieces
    into it) or from the pieces themselves (sglang-boot-*-part-aa, -ab, ...). None when it is there, else why not."""
    import shutil
    import subprocess

    if (site / "sglang" / "__init__.py").is_file():
        return None
    stash = stash or Path.home() / "stash"
    tars = sorted(stash.glob("sglang-boot-*.tar.xz"))
    parts = sorted(stash.glob("sglang-boot-*-part-*"))
    if not tars and not parts:
        return (f"no SGLang in {site} and no {stash}/sglang-boot-* pieces: stash .boot-sgl/p1 .. pN first "
                "(probes/host-run.sh stash .boot-sgl/pK, one call each, within 30 s of each other)")
    if not tars:
        names = {p.name.rsplit("-part-", 1)[0] for p in parts}
        if len(names) != 1:
            return f"pieces of more than one bundle in {stash}: {sorted(names)}"
        joined = stash / f"{names.pop()}.tar.xz"
        with joined.open("wb") as w:
            for p in parts:
                with p.open("rb") as r:
                    shutil.copyfileobj(r, w, 1 << 24)
        tars = [joined]
    tmp = site.with_name(site.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    res = subprocess.run(["tar", "-I", "xz -T0", "-xf", str(tars[-1]), "-C", str(tmp)], capture_output=True,
                         text=True, check=False)
    if res.returncode != 0:
        res = subprocess.run(["tar", "xJf", str(tars[-1]), "-C", str(tmp)], capture_output=True, text=True,
                             check=False)
    if res.returncode != 0 or not (tmp / "sglang" / "__init__.py").is_file():
        return f"unpacking {tars[-1]} failed: {res.stderr[-400:]}"
    shutil.rmtree(site, ignore_errors=True)
    tmp.rename(site)
    return None


def run(case: dict[str, Any]) -> dict[str, Any]:
    import time

    t0 = time.monotonic()
    site = site_dir()
    why = ensure_bundle(site)
    if why:
        return {"outcome": "ERROR", "message": why}
    # the runner's clock for this case started before the unpacking: the boot gets what is left of it
    case = {**case, "timeout_s": float(case.get("timeout_s") or SPEC.timeout_s) - (time.monotonic() - t0)}
    result = _boot(case, site)
    with done_file().open("a", encoding="utf-8") as f:
        f.write(f"{case.get('id')}\n")
    return result


def _boot(case: dict[str, Any], site: Path) -> dict[str, Any]:
    import sys
    import tempfile

    from probes._group import run_in_group

    env = dict(os.environ)
    env["PYTHONPATH"] = str(site) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    logs = os.environ.get("KB_SGL_LOG_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        log = Path(logs) / f"{case.get('id')}.log" if logs else Path(tmp) / "boot.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        limit = float(case.get("timeout_s") or SPEC.timeout_s) - 5
        code, tail, killed = run_in_group([sys.executable, str(HERE / "boot_case.py"), json.dumps(case), str(out),
                                           str(log)], limit, env=env)
        if killed:
            tail = f"killed after {limit:.0f} s; " + tail
        # killed before it wrote its record: what SGLang had printed is still in the log
        rec = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else from_log_only(log, case, code, tail)
    summary = rec.get("summary") or {}
    metrics: dict[str, Any] = {k: summary.get(k) for k in KEEP}
    logs_parsed = rec.get("from_logs") or {}
    metrics.update(release=rec.get("release"), torch=rec.get("torch"), flags=rec.get("flags"),
                   boot_s=rec.get("boot_s"), wall_s=rec.get("wall_s"), gpu_before=rec.get("gpu_before"),
                   server_args=(rec.get("in_process") or {}).get("server_args"),
                   in_process_errors=(rec.get("in_process") or {}).get("errors"),
                   lines=(logs_parsed.get("verbatim") or [])[:40])
    if rec.get("outcome") == "OK":
        return {"outcome": "OK", "metrics": metrics, "seconds": rec.get("boot_s")}
    exc = rec.get("exception") or {}
    metrics["last_log_lines"] = (rec.get("last_log_lines") or [])[-15:]
    outcome = rec.get("outcome") if rec.get("outcome") in ("OOM", "TIMEOUT", "UNSUPPORTED") else "ERROR"
    return {"outcome": outcome, "message": f"{exc.get('type')}: {str(exc.get('message'))[-800:]}",
            "metrics": metrics}


def from_log_only(log: Path, case: dict[str, Any], code: int | None, tail: str) -> dict[str, Any]:
    """The record boot_case.py would have written, from its log alone (it was killed, or died)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_kb_sglang_boot_case", HERE / "boot_case.py")
    assert spec and spec.loader
    bc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bc)
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    logs = bc.parse_logs(lines)
    killed = "killed after" in tail
    return {"outcome": "TIMEOUT" if killed else bc.classify("\n".join(lines[-60:])), "from_logs": logs,
            "summary": bc.summarize({}, logs), "last_log_lines": [ln[:400] for ln in lines[-40:]],
            "exception": {"type": "Timeout" if killed else f"exit {code}",
                          "message": f"boot_case.py wrote no record: {tail[-400:]}"}}
