"""Probe: cuDNN's SDPA forward through the cudnn-frontend Python graph API (not through PyTorch).

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/cudnn_frontend_sdpa.py.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges.cudnn_frontend_sdpa import SPEC, judge

__all__ = ['SPEC', 'cases', 'judge', 'run']


BATCH, HEADS, SEQ = 2, 8, 256


TOLERANCE = {"fp16": 1e-2, "bf16": 3e-2, "fp32": 5e-3}


def cases() -> list[dict[str, Any]]:
    out = [{"dtype": t, "kv_dtype": t, "head_dim": 128, "head_dim_v": 128} for t in ("fp16", "bf16", "fp32")]
    out.append({"dtype": "bf16", "kv_dtype": "fp8_e4m3", "head_dim": 128, "head_dim_v": 128})
    out += [{"dtype": "bf16", "kv_dtype": "bf16", "head_dim": d, "head_dim_v": d} for d in (64, 72, 100, 192, 256)]
    out.append({"dtype": "bf16", "kv_dtype": "bf16", "head_dim": 192, "head_dim_v": 128})
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    import cudnn
    import torch

    names = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8_e4m3": torch.float8_e4m3fn}
    torch.manual_seed(0)
    d, dv = case["head_dim"], case["head_dim_v"]
    q = torch.randn(BATCH, HEADS, SEQ, d, device="cuda").to(names[case["dtype"]])
    k = torch.randn(BATCH, HEADS, SEQ, d, device="cuda").to(names[case["kv_dtype"]])
    v = torch.randn(BATCH, HEADS, SEQ, dv, device="cuda").to(names[case["kv_dtype"]])
    o = torch.empty(BATCH, HEADS, SEQ, dv, device="cuda", dtype=q.dtype)
    version = getattr(cudnn, "__version__", None)
    try:
        io = getattr(cudnn.data_type, {"bf16": "BFLOAT16", "fp16": "HALF", "fp32": "FLOAT",
                                       "fp8_e4m3": "FP8_E4M3"}[case["dtype"]])
        graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT)
        tq, tk, tv = graph.tensor_like(q), graph.tensor_like(k), graph.tensor_like(v)
        to, _ = graph.sdpa(name="sdpa", q=tq, k=tk, v=tv, generate_stats=False, attn_scale=d ** -0.5,
                           use_causal_mask=False)
        to.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride())).set_data_type(io)
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
        workspace = torch.empty(max(1, graph.get_workspace_size()), device="cuda", dtype=torch.uint8)
        graph.execute({tq: q, tk: k, tv: v, to: o}, workspace)
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        return {"outcome": "UNSUPPORTED", "message": text[:1500], "metrics": {"cudnn_frontend": version,
                                                                           "exception": type(exc).__name__}}
    torch.cuda.synchronize()
    ref = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * d ** -0.5, dim=-1) @ v.float()
    err = (o.float() - ref).abs().max().item()
    rel = err / max(ref.abs().max().item(), 1e-12)
    return {"outcome": "OK", "max_abs_err": err, "metrics": {
        "rel_err": rel, "correct": bool(rel <= TOLERANCE.get(case["dtype"], 3e-2)), "cudnn_frontend": version,
        "cudnn_backend": str(cudnn.backend_version())}}
