"""Probe: the Triton fused-attention tutorial kernel (python/tutorials/06-fused-attention.py) forward pass.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/triton_tutorial.py.
"""

from __future__ import annotations

import re
from typing import Any

from kbtool.probe.judges.triton_tutorial import SPEC, judge

__all__ = ['SPEC', 'cases', 'judge', 'run']


BATCH, HEADS, SEQ = 1, 4, 1024


TOLERANCE = {"fp16": 1e-2, "bf16": 3e-2, "fp8_e5m2": 1.5e-1}


"""Head dims every tuning configuration compiles at (BLOCK_N in 32..128 <= HEAD_DIM, and the forward's own list)."""


FP8_TRIES = 3


def cases() -> list[dict[str, Any]]:
    out = [{"dtype": "fp16", "kv_dtype": "fp16", "head_dim": d} for d in (16, 32, 64, 128, 256, 80, 512)]
    out += [{"dtype": "bf16", "kv_dtype": "bf16", "head_dim": 64},
            {"dtype": "fp8_e5m2", "kv_dtype": "fp8_e5m2", "head_dim": 64},
            {"dtype": "fp8_e5m2", "kv_dtype": "fp8_e5m2", "head_dim": 128},
            {"dtype": "bf16", "kv_dtype": "fp8_e5m2", "head_dim": 64}]
    return out


def root_cause(exc: BaseException) -> BaseException:
    """The innermost exception under Triton's CompilationErrors (their text is kernel source, not a reason)."""
    seen = {id(exc)}
    while True:
        nxt = exc.__cause__ or exc.__context__
        if nxt is None or id(nxt) in seen:
            return exc
        seen.add(id(nxt))
        exc = nxt


def compile_refusal(exc: BaseException) -> dict[str, Any] | None:
    """A compile error whose root cause names a dtype: the kernel does not take that dtype (UNSUPPORTED, DTYPE)."""
    if type(exc).__name__ not in ("CompilationError", "CompileTimeAssertionFailure"):
        return None
    root = root_cause(exc)
    text = f"{type(root).__name__}: {root}"
    if root is exc or not re.search(r"dtype|same type|type mismatch|incompatible", text, re.IGNORECASE):
        return None
    return {"outcome": "UNSUPPORTED", "message": text[:800],
            "metrics": {"exception": type(exc).__name__, "root_cause": text[:800], "gate": "DTYPE"}}


def spread(configs: list[Any]) -> list[Any]:
    """The configurations in the order tried: the tutorial's first, then the first of each other tile shape
    (BLOCK_M, BLOCK_N), then the rest, so a retry changes the tile and not only the pipeline depth."""
    first: dict[Any, Any] = {}
    for c in configs:
        kw = getattr(c, "kwargs", {}) or {}
        first.setdefault((kw.get("BLOCK_M"), kw.get("BLOCK_N")), c)
    lead = list(first.values())
    return lead + [c for c in configs if all(c is not x for x in lead)]


def _source(tutorial: Any) -> str | None:
    """What probes/fetch-tutorial.sh wrote beside the file (repository, tag or commit), if anything."""
    from pathlib import Path

    path = Path(str(getattr(tutorial, "__file__", "") or "")).with_name("SOURCE")
    try:
        return path.read_text(encoding="utf-8").strip()[:200] or None
    except OSError:
        return None


def _kernels(tutorial: Any) -> list[Any]:
    out = []
    for name in ("_attn_fwd", "_attn_fwd_tma"):
        kernel = getattr(tutorial, name, None)
        if kernel is not None and getattr(kernel, "configs", None):
            out.append(kernel)
    return out


def _import_tutorial() -> Any:
    """The tutorial module. The file as published imports pytest for its test functions; a host without pytest
    gets a stand-in whose decorators (pytest.mark.*) return the function unchanged: the probe calls no test."""
    import importlib
    import importlib.util
    import sys
    import types

    if importlib.util.find_spec("pytest") is None and "pytest" not in sys.modules:
        class _Mark:
            def __getattr__(self, name: str) -> Any:
                return lambda *a, **k: (a[0] if len(a) == 1 and callable(a[0]) and not k else (lambda f: f))

        stub = types.ModuleType("pytest")
        stub.mark = _Mark()  # type: ignore[attr-defined]
        sys.modules["pytest"] = stub
    return importlib.import_module("fused_attention_tutorial")


def run(case: dict[str, Any]) -> dict[str, Any]:
    tutorial = _import_tutorial()

    kernels = _kernels(tutorial)
    full = {id(k): spread(list(k.configs)) for k in kernels}
    tries = FP8_TRIES if case["dtype"] == "fp8_e5m2" else 1
    failures: list[str] = []
    for i in range(tries):
        for k in kernels:
            k.configs = full[id(k)][i:i + 1] or full[id(k)][:1]
            getattr(k, "cache", {}).clear()
        try:
            result = _run_once(tutorial, case)
        except Exception as exc:
            refusal = compile_refusal(exc)
            if refusal is not None:
                return refusal
            root = root_cause(exc)
            failures.append(f"config {i}: {type(root).__name__}: {str(root)[:200]}")
            if i + 1 == tries:
                raise
            continue
        if failures:
            result["metrics"]["failed_configs"] = failures
        result["metrics"]["config_index"] = i
        result["metrics"]["tutorial_source"] = _source(tutorial)
        return result
    raise AssertionError("unreachable")


def _run_once(tutorial: Any, case: dict[str, Any]) -> dict[str, Any]:
    import torch

    names = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8_e5m2": torch.float8_e5m2}
    torch.manual_seed(0)
    d = case["head_dim"]
    shape = (BATCH, HEADS, SEQ, d)
    q = (torch.randn(shape, device="cuda") * 0.5).to(names[case["dtype"]])
    k = (torch.randn(shape, device="cuda") * 0.5).to(names[case["kv_dtype"]])
    v32 = torch.randn(shape, device="cuda") * 0.5
    if case["kv_dtype"] == "fp8_e5m2":  # the tutorial reads an fp8 V transposed
        v = v32.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)
    else:
        v = v32.to(names[case["kv_dtype"]])
    scale = d ** -0.5
    out = tutorial.attention(q, k, v, False, scale)
    torch.cuda.synchronize()
    ref = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * scale, dim=-1) @ v.float()
    err = (out.float() - ref).abs().max().item()
    rel = err / max(ref.abs().max().item(), 1e-12)
    return {"outcome": "OK", "max_abs_err": err,
            "metrics": {"rel_err": rel, "correct": bool(rel <= TOLERANCE[case["dtype"]]), "out_dtype": str(out.dtype)}}
