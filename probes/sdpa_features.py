"""Probe: what PyTorch SDPA offers beyond plain attention: attention sinks, a sliding window, and the math backend's.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/sdpa_features.py.
"""

from __future__ import annotations

import re
from typing import Any

from kbtool.probe.judges.sdpa_features import SPEC, WORKSPACE, judge, summarize
from probes.sdpa_gates import BACKENDS, sdpa_backend

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


BATCH, HEADS, SEQ, D = 2, 8, 256, 128


WINDOW = 128


TOLERANCE = 3e-2


FITS_BOUND = 64 * 2**30


"""A score matrix at most this large is declared to fit, one at least TOO_BIG large not to (checked on the host)."""


TOO_BIG = 512 * 2**30


COMMON = {"dtype": "bf16", "kv_dtype": "bf16", "sinks": False, "sliding_window": 0}


def score_bytes(heads: int, seq: int, batch: int = 1) -> int:
    """The claim's rule: one fp32 score matrix, batch x heads x q_len x kv_len x 4 bytes."""
    return batch * heads * seq * seq * 4


def cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in BACKENDS:
        out.append({**COMMON, "kind": "sinks", "backend": b, "head_dim": D, "sinks": True})
    for b in ("flash", "efficient", "math"):
        out.append({**COMMON, "kind": "window", "backend": b, "head_dim": D, "sliding_window": WINDOW})
    for heads, seq, d in WORKSPACE:
        need = score_bytes(heads, seq)
        fits = True if need <= FITS_BOUND else False if need >= TOO_BIG else None
        out.append({**COMMON, "kind": "workspace", "backend": "math", "head_dim": d, "num_heads": heads,
                    "seq": seq, "score_matrix_bytes": need, "score_matrix_fits": fits})
    return out


def _compare(out: Any, ref: Any) -> dict[str, Any]:
    err = (out.float() - ref).abs().max().item()
    rel = err / max(ref.abs().max().item(), 1e-12)
    return {"rel_err": rel, "correct": bool(rel <= TOLERANCE)}


def _refusal(exc: Exception, caught: list[Any], **metrics: Any) -> dict[str, Any]:
    noise = ("kernel not used because", "has been runtime disabled")
    reasons = [str(w.message) for w in caught if not any(x in str(w.message) for x in noise)]
    return {"outcome": "UNSUPPORTED", "message": " | ".join([*reasons, f"{type(exc).__name__}: {exc}"])[:1500],
            "metrics": {"exception": type(exc).__name__, **metrics}}


def _sinks(case: dict[str, Any]) -> dict[str, Any]:
    import warnings

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    schema = torch.ops.aten.scaled_dot_product_attention.default._schema
    names = [a.name for a in schema.arguments]
    sink_args = [n for n in names if "sink" in n.lower()]
    q, k, v = (torch.randn(BATCH, HEADS, SEQ, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    sink = torch.randn(HEADS, device="cuda", dtype=torch.float32)
    keyword = sink_args[0] if sink_args else "sinks"
    with warnings.catch_warnings(record=True) as caught, sdpa_kernel([sdpa_backend(case["backend"])]):
        warnings.simplefilter("always")
        try:
            out = F.scaled_dot_product_attention(q, k, v, **{keyword: sink})
        except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
            gate = "SINKS" if not sink_args and isinstance(exc, TypeError) and "sink" in str(exc) else None
            return _refusal(exc, caught, schema_args=names, **({"gate": gate} if gate else {}))
    torch.cuda.synchronize()
    s = (q.float() @ k.float().transpose(-1, -2)) / D**0.5
    s = torch.cat([s, sink.view(1, HEADS, 1, 1).expand(BATCH, HEADS, SEQ, 1)], dim=-1)
    ref = torch.softmax(s, dim=-1)[..., :-1] @ v.float()
    return {"outcome": "OK", "metrics": {"schema_args": names, "keyword": keyword, **_compare(out, ref)}}


def _window(case: dict[str, Any]) -> dict[str, Any]:
    import warnings

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    q, k, v = (torch.randn(BATCH, HEADS, SEQ, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    i = torch.arange(SEQ, device="cuda")[:, None]
    j = torch.arange(SEQ, device="cuda")[None, :]
    band = (j <= i) & (j > i - case["sliding_window"])
    with warnings.catch_warnings(record=True) as caught, sdpa_kernel([sdpa_backend(case["backend"])]):
        warnings.simplefilter("always")
        try:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=band)
        except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
            return _refusal(exc, caught)
    torch.cuda.synchronize()
    s = (q.float() @ k.float().transpose(-1, -2)) / D**0.5
    ref = torch.softmax(s.masked_fill(~band, float("-inf")), dim=-1) @ v.float()
    return {"outcome": "OK", "metrics": _compare(out, ref)}


def _tried_bytes(text: str) -> int | None:
    """The size in torch's "Tried to allocate 1024.00 GiB" message, in bytes."""
    m = re.search(r"tried to allocate ([\d.]+) ?([KMGT]i?B)", text, re.IGNORECASE)
    if not m:
        return None
    unit = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[m.group(2)[0].upper()]
    return int(float(m.group(1)) * unit)


def _workspace(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    heads, n, d = case["num_heads"], case["seq"], case["head_dim"]
    q, k, v = (torch.randn(1, heads, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    need = case["score_matrix_bytes"]
    facts: dict[str, Any] = {"free_bytes": int(free), "total_bytes": int(total), "score_matrix_bytes": need}
    if (need <= free) != case["score_matrix_fits"]:
        return {"outcome": "ERROR", "message": f"premise failed: score matrix {need} B against {free} B free "
                f"does not match score_matrix_fits={case['score_matrix_fits']}", "metrics": facts}
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    try:
        with sdpa_kernel([SDPBackend.MATH]):
            out = F.scaled_dot_product_attention(q, k, v)
        torch.cuda.synchronize()
    except torch.OutOfMemoryError as exc:
        text = str(exc)
        tried = _tried_bytes(text)
        del q, k, v
        torch.cuda.empty_cache()
        # The score matrix's first allocation is at least bf16 batch x heads x q x kv (half the fp32 rule).
        return {"outcome": "OOM", "message": f"OutOfMemoryError: {text[:600]}",
                "metrics": {**facts, "tried_bytes": tried, "score_alloc": tried is not None and tried >= need // 2}}
    peak = torch.cuda.max_memory_allocated() - base
    return {"outcome": "OK", "metrics": {**facts, "peak_bytes": int(peak), "peak_over_rule": peak / need,
                                         "out_dtype": str(out.dtype)}}


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    return {"sinks": _sinks, "window": _window, "workspace": _workspace}[case["kind"]](case)
