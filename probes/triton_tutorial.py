"""Probe: the Triton fused-attention tutorial kernel (python/tutorials/06-fused-attention.py) forward pass.

The tutorial ships in Triton's source tree, not in its wheel; a host that has the file puts it on the path as
`fused_attention_tutorial.py`. Cases: fp16 at head dims 16-256 and two it does not list (80, 512), bf16, fp8_e5m2
(V stored transposed, as the tutorial's benchmark does), and a bf16 query with fp8_e5m2 K/V; (1, 4, 1024, D),
non-causal. Autotuning is cut to the first configuration of each kernel (one compile per case): tuning changes
speed, not which inputs the kernel takes (every configuration has BLOCK_N >= 32, so the kernel's
static_assert(BLOCK_N <= HEAD_DIM) refuses head dim 16 under any of them).

v2: a compile error is read down to its root cause (Triton chains the error of the failing builtin, say tl.dot's
operand-dtype check, under CompilationErrors that echo kernel source); a root cause that names a dtype is the
kernel refusing that dtype (DTYPE). fp8_e5m2 runs at head dims 64 and 128, each trying up to three tuning
configurations in turn until one compiles (v1's only configuration crashed Triton's TTGIR pass manager at hd64). The
dtype claim is judged at head dims every configuration compiles (32-256), the hardware claim on fp16 cases there:
a head-dim refusal says nothing about dtypes or the GPU.

Getting the file: `probes/fetch-tutorial.sh` puts it in the ignored .tutorial/ (see CONTRIBUTING.md, "Add a
probe"); probes/host-run.sh puts .tutorial/ on the path, and the lead's run carries `.tutorial` in its carry list.
"""

from __future__ import annotations

import re
from typing import Any

from kbtool.probe.judging import claim_expect, claim_gates, default_reason, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="triton-tutorial",
    version=2,
    order=35,
    title="Triton fused-attention tutorial: dtypes and head dims",
    claims=["triton-fused-attention-dtypes", "triton-fused-attention-head-dims", "triton-fused-attention-hardware"],
    requires={"archs": None, "packages": ["torch", "triton", "triton-tutorial"]},
    timeout_s=240,
    untestable=("The tutorial kernel is not a package: the triton wheel does not ship python/tutorials/"
                "06-fused-attention.py and the probe host cannot fetch it; probes/fetch-tutorial.sh puts it in "
                ".tutorial/ as fused_attention_tutorial.py, which must travel to the host to run this probe."),
    rejudges=(1,),
)

BATCH, HEADS, SEQ = 1, 4, 1024
TOLERANCE = {"fp16": 1e-2, "bf16": 3e-2, "fp8_e5m2": 1.5e-1}
COMPILED_HEAD_DIMS = (32, 64, 128, 256)
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


def _label(p: dict[str, Any]) -> str:
    return f"q {p.get('dtype')} kv {p.get('kv_dtype')} hd{p.get('head_dim')}"


def reason_of(obs: dict[str, Any]) -> str | None:
    """The tutorial's own head-dim checks: `assert HEAD_DIM_K in {16, ...}` in forward, and
    `tl.static_assert(BLOCK_N <= HEAD_DIM)` in the kernel (every tuning config has BLOCK_N >= 32). Other compile
    errors echo kernel source, whose words name no gate: no reason is read from them."""
    text = str(obs.get("message") or "") + str((obs.get("metrics") or {}).get("traceback_tail") or "")
    if "assert HEAD_DIM_K in" in text or "static_assert(BLOCK_N <= HEAD_DIM)" in text:
        return "HEAD_DIM"
    if isinstance((obs.get("metrics") or {}).get("gate"), str):
        return default_reason(obs)  # a root cause the probe read (compile_refusal)
    return None


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    claims = env.get("claims") or {}

    def bind(p: dict[str, Any]) -> dict[str, Any]:
        out = {"dtype": p.get("dtype"), "kv_dtype": p.get("kv_dtype"),
               "kv_dtype_differs": p.get("kv_dtype") != p.get("dtype"), "head_dim": p.get("head_dim"),
               "head_dim_v": p.get("head_dim"), "phase": "prefill"}
        out.update(env_vars(env))
        return out

    def compiled(p: dict[str, Any]) -> bool:
        return p.get("head_dim") in COMPILED_HEAD_DIMS

    def only(cid: str, where: Any) -> Any:
        data = claims.get(cid)
        if data is None:
            return None
        own = claim_expect(data, lambda p: ["triton-fused-attention"], bind)
        return lambda p: own(p) if where(p) else None

    def fp16(p: dict[str, Any]) -> bool:
        return compiled(p) and p.get("dtype") == p.get("kv_dtype") == "fp16"

    overrides = {cid: f for cid, f in (
        ("triton-fused-attention-dtypes", only("triton-fused-attention-dtypes", compiled)),
        ("triton-fused-attention-hardware", only("triton-fused-attention-hardware", fp16)),
    ) if f is not None}
    gates = claim_gates(claims, SPEC.claims, lambda p: ["triton-fused-attention"], bind, overrides=overrides)
    scope = {"sm": env.get("architecture"), "triton": (env.get("libraries") or {}).get("triton"),
             "phase": "prefill", "dtypes": values(observations, "dtype", lambda p: True),
             "head_dims": values(observations, "head_dim", lambda p: True)}
    return judge_gates(gates, observations, lambda g: scope, _label, reason_of=reason_of)
