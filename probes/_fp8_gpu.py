"""GPU half of probes/fp8_accumulation.py: inputs, references, the switch kernel and the library paths.

Loaded only inside run(case) on the GPU host (torch, cupy, flashinfer are imported here, never on CPU).
"""

from __future__ import annotations

import hashlib
import math
import os
import pathlib
import re
import shutil
import subprocess
from typing import Any

import torch

HERE = pathlib.Path(__file__).resolve().parent
CU = HERE / "csrc" / "fp8_wgmma_acc.cu"
E4M3_MAX = 448.0


# ---- inputs and references ----------------------------------------------------------------------------


def make_inputs(n: int, c: dict[str, Any]) -> dict[str, Any]:
    d, m = c["head_dim"], c["queries"]
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(c["seed"])
    k = torch.randn(n, d, generator=g, device=dev, dtype=torch.float64)
    e = torch.randn(n, d, generator=g, device=dev, dtype=torch.float64)
    u = torch.randn(m, d, generator=g, device=dev, dtype=torch.float64)
    u = u / u.norm(dim=1, keepdim=True)
    q = math.sqrt(d) * u
    v = 1.0 + e  # common component 1 in every dimension
    pos = torch.tensor([int(((i * 0.6180339887498949) % 1.0) * n) for i in range(m)], device=dev)
    a = torch.logspace(math.log10(c["a_min"]), math.log10(c["a_max"]), m, device=dev, dtype=torch.float64)
    sm = 1.0 / math.sqrt(d)
    s = (q @ k.T) * sm
    s[torch.arange(m, device=dev), pos] = -math.inf
    target = torch.log(a / (1 - a)) + torch.logsumexp(s, dim=1)  # needle logit giving weight a
    for i in range(m):
        j = int(pos[i])
        orth = k[j] - (k[j] @ u[i]) * u[i]
        k[j] = orth + (target[i] / (sm * math.sqrt(d))) * u[i]
    out: dict[str, Any] = {"pos": pos, "a_target": a, "sm_scale": sm}
    for name, x in (("q", q), ("k", k), ("v", v)):
        scale = float(x.abs().max()) / E4M3_MAX
        x8 = (x / scale).to(torch.float8_e4m3fn)
        out[name + "8"], out[name + "_scale"] = x8, scale
        out[name + "_dq"] = x8.to(torch.float64) * scale
        out[name + "_bf16"] = x.to(torch.bfloat16)
    return out


def attention64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm: float) -> tuple[torch.Tensor, torch.Tensor]:
    p = torch.softmax((q @ k.T) * sm, dim=1)
    return p @ v, p


def err(out: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    diff = out - ref
    return {
        "rel_err": float(diff.norm() / ref.norm()),
        "bias": float(diff.mean() / ref.abs().mean()),
        "max_abs_err": float(diff.abs().max()),
    }


def retrieval(out: torch.Tensor, v: torch.Tensor, pos: torch.Tensor) -> float:
    mu = v.mean(dim=0)
    oc, vc = out - mu, v - mu
    cos = (oc @ vc.T) / oc.norm(dim=1, keepdim=True) / vc.norm(dim=1)
    return float((cos.argmax(dim=1) == pos).double().mean())


def kernel_names(fn: Any) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = {e.name for e in prof.events() if e.device_type.name == "CUDA"}
    return sorted(n for n in names if not n.startswith(("Memcpy", "Memset")))[:12]


# ---- the switch kernel ----------------------------------------------------------------------------------


def nvcc() -> str:
    for cand in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and os.path.exists(cand):
            return cand
    raise RuntimeError("nvcc not found on this host")


def build() -> pathlib.Path:
    src = CU.read_bytes()
    tag = hashlib.sha256(src).hexdigest()[:12]
    outdir = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / "kb-fp8-acc"
    outdir.mkdir(parents=True, exist_ok=True)
    cubin = outdir / f"fp8_wgmma_acc-{tag}.cubin"
    if not cubin.exists():
        cmd = [nvcc(), "-cubin", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-o", str(cubin), str(CU)]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"nvcc failed: {res.stderr[-2000:]}")
    return cubin


class Switch:
    """The four kernels of fp8_wgmma_acc.cu, launched through CuPy on torch tensors."""

    def __init__(self) -> None:
        import cupy

        self.cp = cupy
        self.mod = cupy.RawModule(path=str(build()))

    def __call__(self, name: str, p8: torch.Tensor, vt8: torch.Tensor, interval: int) -> torch.Tensor:
        m, n = p8.shape
        d = vt8.shape[0]
        out = torch.full((m, d), float("nan"), device="cuda", dtype=torch.float32)  # poisoned
        fn = self.mod.get_function(name)
        grid, block = ((d // 8, m // 64), (128,)) if name.startswith("wgmma") else ((d // 8, m // 16), (32,))
        torch.cuda.synchronize()
        np = self.cp
        fn(
            grid,
            block,
            (
                np.uint64(p8.data_ptr()),
                np.uint64(vt8.data_ptr()),
                np.uint64(out.data_ptr()),
                np.int32(n),
                np.int32(d),
                np.int32(interval),
            ),
        )
        self.cp.cuda.runtime.deviceSynchronize()
        if torch.isnan(out).any():
            raise RuntimeError(f"{name}: output not fully written")
        return out


def model_inplace(p8: torch.Tensor, v8: torch.Tensor, step: int, bits: int, per_product: bool) -> torch.Tensor:
    """Truncation models of the in-place tensor-core accumulator (vectorized fp8_accumulation.accumulate).

    per_product=False: each step's exact group sum is added and the accumulator keeps `bits` mantissa bits.
    per_product=True: every product and the accumulator are aligned to the largest exponent among them and
    floored to `bits` bits below its leading bit before the sum (the mechanism quoted from DeepSeek-V3).
    """
    m, n = p8.shape
    t = n // step
    pp = p8.to(torch.float64).view(m, t, step)
    vv = v8.to(torch.float64).view(t, step, -1)
    acc = torch.zeros(m, v8.shape[1], device=p8.device, dtype=torch.float64)
    for i in range(t):
        if per_product:
            prods = pp[:, i, :, None] * vv[i][None]  # [m, step, d], exact
            top = torch.maximum(prods.abs().amax(dim=1), acc.abs())
            _, ex = torch.frexp(top)
            ulp = torch.ldexp(torch.ones_like(top), ex - bits)
            acc = torch.floor(acc / ulp) * ulp + (torch.floor(prods / ulp[:, None]) * ulp[:, None]).sum(dim=1)
        else:
            acc = acc + pp[:, i] @ vv[i]
            mant, ex = torch.frexp(acc)
            acc = torch.ldexp(torch.trunc(mant * 2.0 ** (bits + 1)) / 2.0 ** (bits + 1), ex)
    return acc


def run_switch(x: dict[str, Any], c: dict[str, Any]) -> dict[str, Any]:
    sw = Switch()
    sm, pscale = x["sm_scale"], c["p_scale"]
    s = (x["q_dq"] @ x["k_dq"].T) * sm
    p = torch.exp(s - s.max(dim=1, keepdim=True).values)
    l_sum = p.sum(dim=1, keepdim=True)
    p8 = (p * pscale).to(torch.float32).to(torch.float8_e4m3fn)
    v8 = x["v8"]
    vt8 = v8.view(torch.uint8).T.contiguous()
    p8u = p8.view(torch.uint8).contiguous()
    post = x["v_scale"] / pscale / l_sum
    ref64, _ = attention64(x["q_dq"], x["k_dq"], x["v_dq"], sm)
    ref_pv = (p8.to(torch.float64) @ v8.to(torch.float64)) * post
    steps = p8.shape[1] // c["step_keys"]
    runs = [
        ("wgmma_inplace", 1),
        *[("wgmma_promote", k) for k in c["intervals"]],
        ("wgmma_promote", steps),
        ("mma_inplace", 1),
        ("mma_promote", 4),
    ]
    variants: dict[str, Any] = {}
    raw: dict[str, torch.Tensor] = {}
    for name, interval in runs:
        acc = sw(name, p8u, vt8, interval)
        out = acc.to(torch.float64) * post
        key = name if name.endswith("inplace") else f"{name}_{'end' if interval == steps else interval}"
        raw[key] = acc
        variants[key] = {
            "promote_every_keys": None if name.endswith("inplace") else interval * c["step_keys"],
            "acc": err(out, ref_pv),
            "total": err(out, ref64),
            "retrieval": retrieval(out, x["v_dq"], x["pos"]),
        }
    hw = raw["wgmma_inplace"].to(torch.float64) * post
    models = {}
    for label, bits, per_product in (("fp22_sum_trunc13", 13, False), ("product_align14", 14, True)):
        mo = model_inplace(p8, v8, c["step_keys"], bits, per_product) * post
        models[label] = {
            **err(mo, ref_pv),
            "rel_diff_to_hw": float((mo - hw).norm() / (hw - ref_pv).norm().clamp_min(1e-300)),
        }
    return {
        "outcome": "OK",
        "kernels": ["wgmma_inplace", "wgmma_promote", "mma_inplace", "mma_promote"],
        "max_abs_err": variants["wgmma_inplace"]["acc"]["max_abs_err"],
        "metrics": {
            "variants": variants,
            "ref64_retrieval": retrieval(ref64, x["v_dq"], x["pos"]),
            "p8_zero_fraction": float((p8.to(torch.float32) == 0).double().mean()),
            "selfcheck_promote1_acc_err": variants["wgmma_promote_1"]["acc"]["rel_err"],
            "control_promote_at_end_bitwise_equal_inplace": bool(
                torch.equal(raw["wgmma_promote_end"], raw["wgmma_inplace"])
            ),
            "wgmma_vs_mma_inplace_bitwise_equal": bool(torch.equal(raw["wgmma_inplace"], raw["mma_inplace"])),
            "models": models,
        },
    }


def run_codegen() -> dict[str, Any]:
    cubin = build()
    tool = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    res = subprocess.run([tool, "--dump-sass", str(cubin)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"cuobjdump failed: {res.stderr[-1000:]}")
    funcs: dict[str, list[str]] = {}
    cur = None
    for line in res.stdout.splitlines():
        mt = re.search(r"Function : (\w+)", line)
        if mt:
            cur = mt.group(1)
            funcs[cur] = []
        elif cur and re.search(r"/\*[0-9a-f]{4}\*/", line):
            ins = re.sub(r"/\*[0-9a-f]{4}\*/|;.*|/\*.*?\*/", "", line).strip()
            if ins:
                funcs[cur].append(ins)
    stats: dict[str, Any] = {}
    for name, ins in funcs.items():
        ops = [re.sub(r"^@!?U?P\w+\s+", "", i).split()[0] for i in ins]
        stats[name] = {
            "instructions": len(ins),
            "tensor_ops": sum(1 for o in ops if "GMMA" in o or "MMA" in o),
            "tensor_op_names": sorted({o for o in ops if "MMA" in o}),
            "fadd": sum(1 for o in ops if o.startswith("FADD")),
            "sha": hashlib.sha256("\n".join(ins).encode()).hexdigest()[:16],
        }
    differs = {
        fam: (
            fam + "_inplace" in stats
            and fam + "_promote" in stats
            and stats[fam + "_inplace"]["sha"] != stats[fam + "_promote"]["sha"]
            and stats[fam + "_promote"]["fadd"] > stats[fam + "_inplace"]["fadd"]
        )
        for fam in ("wgmma", "mma")
    }
    return {
        "outcome": "OK",
        "kernels": sorted(stats),
        "metrics": {"sass": stats, "switch_changes_sass": differs, "nvcc": nvcc()},
    }


# ---- library paths ----------------------------------------------------------------------------------------


def quant_only(x: dict[str, Any], pscale: float) -> dict[str, Any]:
    """fp64 attention whose only extra error is P rounded to e4m3 at `pscale` (global row max)."""
    s = (x["q_dq"] @ x["k_dq"].T) * x["sm_scale"]
    p = torch.exp(s - s.max(dim=1, keepdim=True).values)
    p8 = (p * pscale).to(torch.float32).to(torch.float8_e4m3fn).to(torch.float64) / pscale
    return p8 @ x["v_dq"] / p.sum(dim=1, keepdim=True)


def run_flashinfer(x: dict[str, Any]) -> dict[str, Any]:
    try:
        import flashinfer
    except ImportError as exc:
        return {"outcome": "SKIPPED", "message": f"flashinfer not importable: {exc}"}
    dev = "cuda"
    q8, k8, v8 = (x[n + "8"].unsqueeze(1).contiguous() for n in ("q", "k", "v"))
    sc = {f"scale_{n}": torch.tensor([x[n + "_scale"]], device=dev, dtype=torch.float32) for n in ("q", "k", "v")}

    def call() -> torch.Tensor:
        return flashinfer.single_prefill_with_kv_cache(q8, k8, v8, o_dtype=torch.bfloat16, backend="fa3", **sc)

    o = call()
    torch.cuda.synchronize()
    names = kernel_names(call)
    out = o[:, 0, :].to(torch.float64)
    ref64, _ = attention64(x["q_dq"], x["k_dq"], x["v_dq"], x["sm_scale"])
    qo = quant_only(x, E4M3_MAX)
    e = err(out, ref64)
    return {
        "outcome": "OK",
        "kernels": names,
        "max_abs_err": e["max_abs_err"],
        "metrics": {
            "total": e,
            "retrieval": retrieval(out, x["v_dq"], x["pos"]),
            "quant_only_p448": err(qo, ref64),
            "ref64_retrieval": retrieval(ref64, x["v_dq"], x["pos"]),
            "flashinfer": getattr(flashinfer, "__version__", "?"),
        },
    }


def run_bf16(x: dict[str, Any]) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    q, k, v = (x[n + "_bf16"][None, None] for n in ("q", "k", "v"))

    def call() -> torch.Tensor:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return sdpa(q, k, v)

    out = call()[0, 0].to(torch.float64)
    names = kernel_names(call)
    v64 = x["v_bf16"].to(torch.float64)
    ref, _ = attention64(x["q_bf16"].to(torch.float64), x["k_bf16"].to(torch.float64), v64, x["sm_scale"])
    e = err(out, ref)
    return {
        "outcome": "OK",
        "kernels": names,
        "max_abs_err": e["max_abs_err"],
        "metrics": {
            "total": e,
            "retrieval": retrieval(out, v64, x["pos"]),
            "ref_retrieval": retrieval(ref, v64, x["pos"]),
        },
    }


def run_fa3(x: dict[str, Any]) -> dict[str, Any]:
    try:
        import flash_attn_interface
    except ImportError as exc:
        return {"outcome": "SKIPPED", "message": f"FA-3 not installed (no wheels; flash_attn_interface: {exc})"}
    q8, k8, v8 = (x[n + "8"][None, :, None, :].contiguous() for n in ("q", "k", "v"))
    ds = {f"{n}_descale": torch.tensor([[x[n + "_scale"]]], device="cuda", dtype=torch.float32) for n in "qkv"}
    res = flash_attn_interface.flash_attn_func(q8, k8, v8, **ds)
    o = res[0] if isinstance(res, tuple) else res
    out = o[0, :, 0, :].to(torch.float64)
    ref64, _ = attention64(x["q_dq"], x["k_dq"], x["v_dq"], x["sm_scale"])
    e = err(out, ref64)
    return {
        "outcome": "OK",
        "kernels": [],
        "max_abs_err": e["max_abs_err"],
        "metrics": {"total": e, "retrieval": retrieval(out, x["v_dq"], x["pos"])},
    }


def run_case(case: dict[str, Any], c: dict[str, Any]) -> dict[str, Any]:
    path = case["path"]
    if path == "codegen":
        return run_codegen()
    x = make_inputs(int(case["ctx"]), c)
    ref64, p = attention64(x["q_dq"], x["k_dq"], x["v_dq"], x["sm_scale"])
    needle_w = p[torch.arange(p.shape[0], device=p.device), x["pos"]]
    del ref64, p
    res = {
        "switch": run_switch,
        "flashinfer": lambda xx, _c: run_flashinfer(xx),
        "bf16": lambda xx, _c: run_bf16(xx),
        "fa3": lambda xx, _c: run_fa3(xx),
    }[path](x, c)
    res.setdefault("metrics", {})["needle_weight"] = {
        "min": float(needle_w.min()),
        "median": float(needle_w.median()),
        "max": float(needle_w.max()),
    }
    return res
