"""Probe: the FlashAttention-4 that vLLM bundles (vllm/vllm_flash_attn/cute, CuTe DSL), by head dim and dtype.

vLLM routes an SM90 head size above 256 from FA-3 to this FA-4 (vllm/v1/attention/backends/fa_utils.py,
get_flash_attn_version: "FA3 does not support head_size=... on SM90: upgrading FlashAttention 3 -> 4"). Its
interface is not pip's flash-attn-4: in vLLM 0.33.0 `_validate_head_dims` accepts 8..512 on compute capability 9
(only its assertion message still says 256), FP8 q/k/v is asserted SM100-only, and an SM90-only in-kernel dequant
takes a bf16 query with an fp8 e4m3 paged KV cache (`fp8_kv_dequant`, page size equal to the kernel's tile_n).

Cases (GQA 8:2, causal, two sequences of 300 and 211 tokens): bf16 at head dims 128..512 through the public
`flash_attn_varlen_func`; fp8 e4m3 q/k/v at 256 and 512; and a bf16 query on an fp8 e4m3 paged cache through
`_flash_attn_fwd(fp8_kv_dequant=True)` at 256 and 512. Outputs are compared with an fp32 reference on the same
(dequantized) inputs. The release is the vLLM wheel the cute tree came from (vllm/KB_RELEASE_FA4, written when it
was packed); the CuTe DSL that compiles it is the host's (its version is in the evidence's libraries).
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judging import claim_gates, default_reason, env_vars, judge_gates, values
from kbtool.probe.spec import ProbeSpec
from kbtool.probe.verdicts import untestable_here

LIB = "vllm-flash-attn-4"
SPEC = ProbeSpec(
    id="vllm-fa4",
    version=1,
    order=44,
    title="FA-4 as vLLM bundles it (vllm_flash_attn/cute): SM90 head dims and fp8",
    claims=["vllm-fa4-sm90-head-dims", "vllm-fa4-fp8-qkv-sm100-only", "vllm-fa4-sm90-fp8-kv-dequant"],
    requires={"archs": None, "packages": ["torch", LIB]},
    timeout_s=300,
    workers=2,
    untestable=("vLLM's FA-4 is the CuTe DSL tree inside the vllm wheel (vllm/vllm_flash_attn/cute), carried without "
                "vLLM with the CuTe DSL, quack and tvm-ffi."),
)

HEAD_DIMS = [128, 256, 320, 384, 448, 512]
LENS = [300, 211]
HEADS, KV_HEADS = 8, 2
TOLERANCE = {"bf16": 2e-2, "fp8": 6e-2}
SM90_ONLY = ("vllm-fa4-sm90-fp8-kv-dequant",)


def cases() -> list[dict[str, Any]]:
    out = [{"head_dim": d, "dtype": "bf16", "kv_dtype": "bf16"} for d in HEAD_DIMS]
    out += [{"head_dim": d, "dtype": "fp8_e4m3", "kv_dtype": "fp8_e4m3"} for d in (256, 512)]
    out += [{"head_dim": d, "dtype": "bf16", "kv_dtype": "fp8_e4m3", "dequant": True} for d in (256, 512)]
    return out


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from vllm.vllm_flash_attn.cute import interface as fa4

    d = int(case["head_dim"])
    torch.manual_seed(0)
    dev = "cuda"
    total = sum(LENS)
    q = torch.randn(total, HEADS, d, device=dev)
    k = torch.randn(total, KV_HEADS, d, device=dev)
    v = torch.randn(total, KV_HEADS, d, device=dev)
    cu = torch.tensor([0, LENS[0], total], device=dev, dtype=torch.int32)
    scale = d ** -0.5
    fp8 = torch.float8_e4m3fn
    if case["dtype"] == "fp8_e4m3":
        qs, ks, vs = (x.abs().amax() / 448.0 for x in (q, k, v))
        q8, k8, v8 = (x / s for x, s in ((q, qs), (k, ks), (v, vs)))
        q8, k8, v8 = q8.to(fp8), k8.to(fp8), v8.to(fp8)
        qf, kf, vf = q8.float() * qs, k8.float() * ks, v8.float() * vs
        desc = {f"{n}_descale": s.reshape(1, 1).expand(len(LENS), KV_HEADS).contiguous().float()
                for n, s in (("q", qs), ("k", ks), ("v", vs))}
        res = fa4._flash_attn_fwd(q8, k8, v8, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(LENS),
                                  max_seqlen_k=max(LENS), softmax_scale=scale, causal=True, **desc)
    elif case.get("dequant"):
        ks, vs = k.abs().amax() / 448.0, v.abs().amax() / 448.0
        k8, v8 = (k / ks).to(fp8), (v / vs).to(fp8)
        qb = q.to(torch.bfloat16)
        qf, kf, vf = qb.float(), k8.float() * ks, v8.float() * vs
        tile_n = fa4._tile_size_fwd_sm90(d, d, True, False).n_block_size
        pages = [-(-n // tile_n) for n in LENS]
        kc = torch.zeros(sum(pages), tile_n, KV_HEADS, d, device=dev, dtype=fp8)
        vc = torch.zeros_like(kc)
        table = torch.zeros(len(LENS), max(pages), device=dev, dtype=torch.int32)
        page, off = 0, 0
        for b, n in enumerate(LENS):
            for p in range(pages[b]):
                lo, hi = off + p * tile_n, min(off + n, off + (p + 1) * tile_n)
                kc[page, : hi - lo] = k8[lo:hi]
                vc[page, : hi - lo] = v8[lo:hi]
                table[b, p] = page
                page += 1
            off += n
        one = torch.ones(len(LENS), KV_HEADS, device=dev)
        res = fa4._flash_attn_fwd(qb, kc, vc, cu_seqlens_q=cu, max_seqlen_q=max(LENS),
                                  seqused_k=torch.tensor(LENS, device=dev, dtype=torch.int32), page_table=table,
                                  softmax_scale=scale, causal=True, k_descale=one * ks, v_descale=one * vs,
                                  fp8_kv_dequant=True)
    else:
        qb, kb_, vb = q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16)
        qf, kf, vf = qb.float(), kb_.float(), vb.float()
        res = fa4.flash_attn_varlen_func(qb, kb_, vb, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(LENS),
                                         max_seqlen_k=max(LENS), softmax_scale=scale, causal=True)
    out = res[0] if isinstance(res, tuple) else res
    torch.cuda.synchronize()
    refs, off = [], 0
    g = HEADS // KV_HEADS
    for n in LENS:
        qq, kk, vv = qf[off:off + n], kf[off:off + n].repeat_interleave(g, 1), vf[off:off + n].repeat_interleave(g, 1)
        s = torch.einsum("qhd,khd->hqk", qq, kk) * scale
        s = s.masked_fill(torch.ones(n, n, device=dev, dtype=torch.bool).triu(1), float("-inf"))
        refs.append(torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vv))
        off += n
    ref = torch.cat(refs)
    o = out.float()
    finite = bool(torch.isfinite(o).all().item())
    rel = float((o - ref).norm() / ref.norm().clamp(min=1e-12))
    tol = TOLERANCE["fp8" if "fp8" in case["kv_dtype"] else "bf16"]
    return {"outcome": "OK", "max_abs_err": float((o - ref).abs().max()),
            "metrics": {"rel_l2": rel, "tolerance": tol, "correct": finite and rel <= tol,
                        "out_dtype": str(out.dtype).removeprefix("torch.")}}


# ---- judge (pure) --------------------------------------------------------------------------------


def _label(p: dict[str, Any]) -> str:
    kv = f" kv {p['kv_dtype']} (in-kernel dequant)" if p.get("dequant") else ""
    return f"hd{p.get('head_dim')} {p.get('dtype')}{kv}"


def reason_of(obs: dict[str, Any]) -> str | None:
    text = str(obs.get("message") or "").lower()
    if "fp8 is only supported on sm100" in text or "fp8_kv_dequant is an sm90-only" in text:
        return "DTYPE"
    if "is not supported on sm90" in text or "is not supported on sm100" in text:
        return "HEAD_DIM"
    return default_reason(obs)


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """Predictions from the claims' own conditions; the build's assertions name the gate they state."""
    claims = env.get("claims") or {}
    version = (env.get("libraries") or {}).get(LIB)

    def bind(p: dict[str, Any]) -> dict[str, Any]:
        kv = p.get("kv_dtype", p.get("dtype"))
        out = {"dtype": p.get("dtype"), "kv_dtype": kv, "kv_dtype_differs": kv != p.get("dtype"),
               "head_dim": p.get("head_dim"), "head_dim_v": p.get("head_dim"), "phase": "prefill"}
        out.update(env_vars(env))
        return out

    gates = claim_gates(claims, SPEC.claims, lambda p: ["flash-attention-4"], bind)
    scope = {"sm": env.get("architecture"), LIB: version, "phase": "prefill",
             "dtypes": values(observations, "dtype", lambda p: True),
             "head_dims": values(observations, "head_dim", lambda p: True)}
    out = judge_gates(gates, observations, lambda g: scope, _label, reason_of=reason_of)
    if env.get("architecture") != "sm90":
        untestable_here(out, SM90_ONLY, f"the in-kernel fp8 KV dequant is SM90's alone; a run on "
                        f"{env.get('architecture')} cannot show it")
    return out
