"""Classifying what happened in a case: OK, UNSUPPORTED, OOM, ERROR or TIMEOUT.

Pure functions, used by the worker (exceptions) and the runner (dead workers).
"""

from __future__ import annotations

import signal
from typing import Any

# Phrases with which libraries refuse an input they do not handle. Matched case-insensitively.
REFUSAL_PHRASES = (
    "not supported",
    "no supported",  # FlashInfer: "No supported CUDA architectures found for major versions [10, 11, 12]."
    "unsupported",
    "only support",  # also "only supports", "only supported"; FA-3: "we only support Q/K headdim in ..."
    "must have",  # FA-3: "query and key must have the same dtype", "q_descale must have shape ..."
    "must divide",
    "no available kernel",
    "not implemented",
    "is not available",
    "requires",
    "must be",
    "invalid head_dim",
    "not compiled with",
)
OOM_PHRASES = ("out of memory", "cuda_error_out_of_memory", "cudaerrormemoryallocation")
# Types with which libraries refuse inputs. AssertionError is how CuTe-DSL kernels (FA-4) state gates.
REFUSAL_TYPES = ("NotImplementedError", "ValueError", "AssertionError")


def classify_exception(type_name: str, message: str) -> str:
    """Outcome for an exception raised by a case, by its type name and message."""
    text = message.lower()
    if type_name in ("MemoryError", "OutOfMemoryError") or any(p in text for p in OOM_PHRASES):
        return "OOM"
    if type_name in REFUSAL_TYPES:
        return "UNSUPPORTED"
    if type_name in ("RuntimeError", "TypeError") and any(p in text for p in REFUSAL_PHRASES):
        return "UNSUPPORTED"
    return "ERROR"


def describe_exit(returncode: int | None, killed_by_us: bool) -> tuple[str, str]:
    """Outcome and message for a worker that died without answering."""
    if returncode is None:
        return "ERROR", "worker stopped answering"
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig == signal.SIGKILL and not killed_by_us:
            return "OOM", f"worker killed by {name} (most likely the kernel's out-of-memory killer)"
        return "ERROR", f"worker crashed: {name}"
    return "ERROR", f"worker exited with status {returncode} before answering"


def normalize_result(raw: object) -> dict[str, Any]:
    """Check what a probe's run() returned and fill defaults; a bad shape becomes an ERROR."""
    if not isinstance(raw, dict):
        return {"outcome": "ERROR", "message": f"run() returned {type(raw).__name__}, not a dict"}
    out = dict(raw)
    outcome = out.get("outcome", "OK")
    # TIMEOUT: a probe whose case runs its own child (vllm-boot's engine process) and stops it at the case's limit
    if outcome not in ("OK", "UNSUPPORTED", "OOM", "ERROR", "TIMEOUT"):
        return {"outcome": "ERROR", "message": f"run() returned unknown outcome {outcome!r}"}
    out["outcome"] = outcome
    out.setdefault("message", None)
    out.setdefault("kernels", [])
    out.setdefault("max_abs_err", None)
    out.setdefault("metrics", {})
    return out
