"""Probe: FlashInfer's other attention paths on this GPU: XQA and trtllm-gen paged decode, cuDNN decode and.

The program: cases and run.

Its SPEC and judge, which `kb validate` runs without this module, are kbtool/probe/judges/flashinfer_paths.py.
"""

from __future__ import annotations

import math
from typing import Any

from kbtool.probe.judges.flashinfer_paths import (
    BATCH,
    KV_HEADS,
    KV_LEN,
    NETWORK_GATE,
    NOT_ATTEMPTED,
    PAGE,
    QO_HEADS,
    SPEC,
    judge,
    summarize,
)

__all__ = ['SPEC', 'cases', 'judge', 'run', 'summarize']


MLA_HEADS, CKV, KPE, MLA_PAGE, MLA_QO = 16, 512, 64, 64, 32


TOLERANCE = 3e-2


"""The trtllm-gen sink case off sm100/sm103: recorded as the probe's own choice (reason PROBE: no gate), since the
v2 cases already show the download gate there and the sink claim is untestable off sm100 (OFF_ARCH_UNTESTABLE)."""


SINK_LOGIT = math.log(KV_LEN)


"""Sink logit per head (natural-log units, like the scaled scores): about a third of every softmax row's mass."""


WINDOW = 255


"""window_left of the sliding-window case: the query attends to its own position and the 255 before it."""


"""Claims about what trtllm-gen kernels take: where trtllm-gen cannot run (its arch gate), they are untestable, even
with its cubins downloaded. The arch claims themselves (requires-sm100, requires-nvidia, cubins) stay testable."""


def cases() -> list[dict[str, Any]]:
    features = feature_cases()
    out: list[dict[str, Any]] = features[:1]  # the FA3 sliding-window prefill: the slowest compile, first
    for path in ("mla-fa3", "mla-fa2"):  # slowest compiles first
        for phase in ("decode", "prefill"):
            for kv in ("bf16", "fp8_e4m3"):
                out.append({"path": path, "phase": phase, "head_dim": CKV + KPE, "kv_dtype": kv})
    for d in (64, 128, 256):
        for kv in ("bf16", "fp8_e4m3"):
            out.append({"path": "xqa", "phase": "decode", "head_dim": d, "kv_dtype": kv})
    for kv in ("bf16", "fp8_e4m3"):
        out.append({"path": "trtllm-gen", "phase": "decode", "head_dim": 128, "kv_dtype": kv, "timeout_s": 150})
    for phase in ("decode", "prefill"):
        out.append({"path": "cudnn", "phase": phase, "head_dim": 128, "kv_dtype": "bf16"})
    return out + features[1:]  # the fa3 sink case last: it reuses the first case's variant


def feature_cases() -> list[dict[str, Any]]:
    """Version 3: sinks, sliding window and the FA3 KV-dtype gate. New JIT variants: one FA3 paged prefill with a
    sliding window (both prefill-fa3 cases) and one fa2 decode with a sliding window; the rest reuse variants earlier
    cases (or flashinfer-head-dim's decode-paged hd128) compiled."""
    base = {"phase": "decode", "head_dim": 128, "kv_dtype": "bf16"}
    fa3 = {"path": "prefill-fa3", "phase": "prefill", "head_dim": 128, "kv_dtype": "bf16", "sliding_window": WINDOW}
    return [
        fa3,  # one FA3 batch-prefill variant (sliding window on) serves both fa3 cases

        {**base, "path": "xqa", "sinks": True},
        {**base, "path": "decode-fa2", "sinks": True},
        {**base, "path": "decode-fa2", "sliding_window": WINDOW},
        {**base, "path": "trtllm-gen", "sinks": True, "timeout_s": 150},
        {"path": "fa3-gate", "phase": "prefill", "head_dim": 128, "dtype": "bf16", "kv_dtype": "fp8_e4m3"},
        {"path": "fa3-gate", "phase": "prefill", "head_dim": 128, "dtype": "bf16", "kv_dtype": "nvfp4"},
        {**fa3, "sinks": True},
        # NVFP4 KV (uint8-packed e2m1, an e4m3 scale per 16 values) on fa2: single prefill, and paged decode through
        # the CUDA-core decode kernel and through the tensor-core (prefill-template) path
        {"path": "nvfp4-prefill-fa2", "phase": "prefill", "head_dim": 128, "kv_dtype": "nvfp4"},
        {"path": "nvfp4-decode-fa2-tc", "phase": "decode", "head_dim": 128, "kv_dtype": "nvfp4"},
        {"path": "nvfp4-decode-fa2", "phase": "decode", "head_dim": 128, "kv_dtype": "nvfp4"},
    ]


def _attend(q: Any, k: Any, v: Any, scale: float, causal_offset: int | None, sinks: Any = None,
            window: int = 0) -> Any:
    """fp32 attention; q [n_q, Hq, Dk], k [n_k, Hkv, Dk], v [n_k, Hkv, Dv]. causal_offset: the first query sits
    at kv position `causal_offset` (bottom-right alignment), None for no mask. sinks [Hq]: one more logit per
    head in every row's softmax denominator, attending to nothing (FlashInfer's tests/attention/test_xqa.py
    ref_attention adds exp(sink - row_max) to the row sum). window (with causal_offset): FlashInfer's window_left."""
    import torch

    group = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    s = torch.einsum("qhd,khd->hqk", q.float(), kf) * scale
    if causal_offset is not None:
        n_q, n_k = q.shape[0], k.shape[0]
        rows = torch.arange(n_q, device=q.device)[:, None] + causal_offset
        cols = torch.arange(n_k, device=q.device)[None, :]
        s = s.masked_fill(cols > rows, float("-inf"))
        if window:  # window_left W: a query at kv position p attends to p - W .. p
            s = s.masked_fill(cols < rows - window, float("-inf"))
    if sinks is not None:
        sink = sinks.float()[:, None, None].expand(-1, s.shape[1], 1)
        p = torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :-1]
    else:
        p = torch.softmax(s, dim=-1)
    return torch.einsum("hqk,khd->qhd", p, vf)


def _check(out: Any, ref: Any, metrics: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.cuda.synchronize()
    err = (out.float() - ref).abs().max().item()
    rel = err / max(ref.abs().max().item(), 1e-12)
    finite = bool(torch.isfinite(out.float()).all().item())
    metrics.update(rel_err=rel, correct=bool(finite and rel <= TOLERANCE))
    return {"outcome": "OK", "max_abs_err": err, "metrics": metrics}


def _checked_with_sinks(out: Any, ref_of: Any, sinks: Any, metrics: dict[str, Any], path: str) -> dict[str, Any]:
    """_check against ref_of(sinks); with sinks, an output that misses the sink reference but matches the plain
    one (ref_of(None)) is the library ignoring the sinks: a refusal of sinks (gate SINKS)."""
    result = _check(out, ref_of(sinks), metrics)
    if sinks is None:
        return result
    plain = ref_of(None)
    metrics["rel_err_without_sinks"] = (out.float() - plain).abs().max().item() / plain.abs().max().item()
    if not metrics["correct"] and metrics["rel_err_without_sinks"] <= TOLERANCE:
        return {"outcome": "UNSUPPORTED", "metrics": {**metrics, "gate": "SINKS"},
                "message": f"{path} ran but ignored the sinks argument: its output equals attention without sinks"}
    return result


def _paged(kv_dtype: Any, d: int) -> tuple[Any, Any, Any, Any]:
    """HND pages k, v [P, Hkv, PAGE, D], block table [B, pages] and seq lens [B]."""
    import torch

    per_seq = KV_LEN // PAGE
    n_pages = BATCH * per_seq
    k = torch.randn(n_pages, KV_HEADS, PAGE, d, device="cuda", dtype=torch.bfloat16).to(kv_dtype)
    v = torch.randn(n_pages, KV_HEADS, PAGE, d, device="cuda", dtype=torch.bfloat16).to(kv_dtype)
    table = torch.arange(n_pages, device="cuda", dtype=torch.int32).reshape(BATCH, per_seq)
    lens = torch.full((BATCH,), KV_LEN, device="cuda", dtype=torch.int32)
    return k, v, table, lens


def _seq(pages: Any, table_row: Any) -> Any:
    """[pages, Hkv, PAGE, D] of one sequence -> [KV_LEN, Hkv, D]."""
    sel = pages[table_row.long()]
    return sel.permute(0, 2, 1, 3).reshape(-1, sel.shape[1], sel.shape[3])


def _decode(case: dict[str, Any], kv_dtype: Any) -> dict[str, Any]:
    import flashinfer
    import torch

    d, path = case["head_dim"], case["path"]
    k, v, table, lens = _paged(kv_dtype, d)
    q = torch.randn(BATCH, QO_HEADS, d, device="cuda", dtype=torch.bfloat16)
    scale = 1.0 / math.sqrt(d)
    workspace = torch.zeros(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    sinks = (SINK_LOGIT + 0.5 * torch.randn(QO_HEADS, device="cuda")).float() if case.get("sinks") else None
    window = int(case.get("sliding_window") or 0)
    metrics: dict[str, Any] = {}
    if path == "cudnn":
        out = flashinfer.cudnn.cudnn_batch_decode_with_kv_cache(
            q, k, v, scale, workspace, max_sequence_kv=KV_LEN, actual_seq_lens_kv=lens, block_tables=table)
    elif path == "decode-fa2":
        per_seq = KV_LEN // PAGE
        indptr = torch.arange(0, BATCH * per_seq + 1, per_seq, device="cuda", dtype=torch.int32)
        last = torch.full((BATCH,), PAGE, device="cuda", dtype=torch.int32)
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "HND", backend="fa2")
        wrapper.plan(indptr, table.reshape(-1), last, QO_HEADS, KV_HEADS, d, PAGE,
                     window_left=window if window else -1, q_data_type=torch.bfloat16, kv_data_type=kv_dtype,
                     sm_scale=scale)
        out = wrapper.run(q, (k, v), sinks=sinks)
    elif path == "trtllm-gen" and sinks is not None and torch.cuda.get_device_capability()[0] != 10:
        return {"outcome": "UNSUPPORTED", "metrics": {"gate": "PROBE"},
                "message": f"{NOT_ATTEMPTED}: trtllm-gen runs on sm100/sm103 only; the probe spares the cubin download"}
    else:
        try:
            out = flashinfer.decode.trtllm_batch_decode_with_kv_cache(
                q, (k, v), workspace, table, lens, KV_LEN, bmm1_scale=scale, bmm2_scale=1.0,
                kv_layout="HND", backend=path, sinks=sinks)
        except Exception as exc:
            if path == "trtllm-gen" and _network_failure(exc):
                return {"outcome": "UNSUPPORTED", "metrics": {"gate": "NETWORK"},
                        "message": f"{NETWORK_GATE}: {type(exc).__name__}: {exc}"}
            raise

    def ref_of(with_sinks: Any) -> Any:
        rows = []
        for b in range(BATCH):
            kb, vb = _seq(k, table[b]), _seq(v, table[b])
            if window:  # window_left W: the last query attends to its own position and the W before it
                kb, vb = kb[-(window + 1):], vb[-(window + 1):]
            rows.append(_attend(q[b][None], kb, vb, scale, None, with_sinks)[0])
        return torch.stack(rows)

    return _checked_with_sinks(out, ref_of, sinks, metrics, path)


PREFILL_QO = 128


"""Queries per request of the prefill-fa3 cases: the last 128 of KV_LEN positions (causal, bottom-right)."""


def _prefill_fa3(case: dict[str, Any]) -> dict[str, Any]:
    """BatchPrefillWithPagedKVCacheWrapper(backend="fa3"), NHD pages, causal, window_left=WINDOW; with sinks, the
    output is compared with the sink and the plain reference like the decode sink cases."""
    import flashinfer
    import torch

    d = case["head_dim"]
    k_hnd, v_hnd, table, _ = _paged(torch.bfloat16, d)
    k, v = k_hnd.transpose(1, 2).contiguous(), v_hnd.transpose(1, 2).contiguous()  # [P, PAGE, Hkv, D]
    q = torch.randn(BATCH * PREFILL_QO, QO_HEADS, d, device="cuda", dtype=torch.bfloat16)
    scale = 1.0 / math.sqrt(d)
    sinks = (SINK_LOGIT + 0.5 * torch.randn(QO_HEADS, device="cuda")).float() if case.get("sinks") else None
    window = int(case["sliding_window"])
    per_seq = KV_LEN // PAGE
    qo_indptr = torch.arange(0, BATCH * PREFILL_QO + 1, PREFILL_QO, device="cuda", dtype=torch.int32)
    kv_indptr = torch.arange(0, BATCH * per_seq + 1, per_seq, device="cuda", dtype=torch.int32)
    last = torch.full((BATCH,), PAGE, device="cuda", dtype=torch.int32)
    workspace = torch.zeros(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD", backend="fa3")
    wrapper.plan(qo_indptr, kv_indptr, table.reshape(-1), last, QO_HEADS, KV_HEADS, d, PAGE, causal=True,
                 sm_scale=scale, window_left=window, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    out = wrapper.run(q, (k, v), sinks=sinks)
    metrics: dict[str, Any] = {}

    def ref_of(with_sinks: Any) -> Any:
        return torch.cat([_attend(q[b * PREFILL_QO:(b + 1) * PREFILL_QO], _seq(k_hnd, table[b]), _seq(v_hnd, table[b]),
                                  scale, KV_LEN - PREFILL_QO, with_sinks, window) for b in range(BATCH)])

    return _checked_with_sinks(out, ref_of, sinks, metrics, case["path"])


def _fa3_gate(case: dict[str, Any]) -> dict[str, Any]:
    """FlashInfer's FA3 feature gate (flashinfer.utils.is_fa3_backend_supported) asked for a bf16 query with this
    KV dtype (NVFP4 KV is uint8-packed). No kernel runs: a True answer is recorded as the gate letting it
    through (gate_only), a False one as the refusal backend="auto" answers by falling back to fa2."""
    import torch
    from flashinfer import utils as fi_utils

    kv = {"fp8_e4m3": torch.float8_e4m3fn, "nvfp4": torch.uint8}[case["kv_dtype"]]
    q = {"bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}[case.get("dtype", "bf16")]
    ok = bool(fi_utils.is_fa3_backend_supported(0, False, False, q, kv))
    metrics = {"gate_only": True, "is_fa3_backend_supported": ok,
               "gate": None if ok else ("KV_DTYPE" if case["kv_dtype"] == "nvfp4" else "Q_DTYPE")}
    if ok:
        return {"outcome": "OK", "metrics": metrics,
                "message": f"is_fa3_backend_supported(q={case.get('dtype')}, kv={case['kv_dtype']}) is True"}
    return {"outcome": "UNSUPPORTED", "metrics": metrics,
            "message": f"flashinfer.utils.is_fa3_backend_supported(q={case.get('dtype')}, kv={case['kv_dtype']}) "
                       "is False"}


E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


"""FP4 (e2m1) magnitudes by 3-bit code; bit 3 is the sign. Two codes a byte, the even element in the low nibble
(flashinfer include/flashinfer/page.cuh nvfp4_append_quantize_block: packed = lo | hi << 4)."""


NVFP4_BLOCK = 16


def _nvfp4(shape: tuple[int, ...]) -> tuple[Any, Any, Any]:
    """Random NVFP4 data of `shape` (last dim unpacked): (packed uint8 [..., D/2], e4m3 scales [..., D/16], the
    values they stand for in fp32). Every byte is a valid pair of e2m1 codes; scales are 0.25, 0.5 or 1."""
    import torch

    d = shape[-1]
    packed = torch.randint(0, 256, (*shape[:-1], d // 2), device="cuda", dtype=torch.uint8)
    levels = torch.tensor([0.25, 0.5, 1.0], device="cuda")
    sf = levels[torch.randint(0, 3, (*shape[:-1], d // NVFP4_BLOCK), device="cuda")].to(torch.float8_e4m3fn)
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(*shape[:-1], d).long()
    mag = torch.tensor(E2M1, device="cuda")[codes & 7]
    vals = torch.where((codes & 8) != 0, -mag, mag) * sf.float().repeat_interleave(NVFP4_BLOCK, dim=-1)
    return packed, sf, vals


def _nvfp4_prefill(case: dict[str, Any]) -> dict[str, Any]:
    """single_prefill_with_kv_cache(backend="fa2") with NVFP4 K/V (NHD [kv_len, Hkv, D/2]) and kv_cache_sf,
    causal, the last PREFILL_QO of KV_LEN positions."""
    import flashinfer
    import torch

    d = case["head_dim"]
    k, k_sf, kf = _nvfp4((KV_LEN, KV_HEADS, d))
    v, v_sf, vf = _nvfp4((KV_LEN, KV_HEADS, d))
    q = (0.1 * torch.randn(PREFILL_QO, QO_HEADS, d, device="cuda")).to(torch.bfloat16)
    scale = 1.0 / math.sqrt(d)
    out = flashinfer.single_prefill_with_kv_cache(q, k, v, causal=True, sm_scale=scale, backend="fa2",
                                                  kv_cache_sf=(k_sf, v_sf))
    return _check(out, _attend(q, kf, vf, scale, KV_LEN - PREFILL_QO), {"packed": "lo-nibble-first"})


def _nvfp4_decode(case: dict[str, Any]) -> dict[str, Any]:
    """BatchDecodeWithPagedKVCacheWrapper(backend="fa2"), HND pages of NVFP4 K/V [P, Hkv, PAGE, D/2] with scales
    [P, Hkv, PAGE, D/16]; use_tensor_cores for the -tc path (decode.py passes the block scales only there)."""
    import flashinfer
    import torch

    d = case["head_dim"]
    per_seq = KV_LEN // PAGE
    n_pages = BATCH * per_seq
    k, k_sf, kf = _nvfp4((n_pages, KV_HEADS, PAGE, d))
    v, v_sf, vf = _nvfp4((n_pages, KV_HEADS, PAGE, d))
    table = torch.arange(n_pages, device="cuda", dtype=torch.int32).reshape(BATCH, per_seq)
    q = (0.1 * torch.randn(BATCH, QO_HEADS, d, device="cuda")).to(torch.bfloat16)
    scale = 1.0 / math.sqrt(d)
    indptr = torch.arange(0, n_pages + 1, per_seq, device="cuda", dtype=torch.int32)
    last = torch.full((BATCH,), PAGE, device="cuda", dtype=torch.int32)
    workspace = torch.zeros(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
        workspace, "HND", use_tensor_cores=case["path"].endswith("-tc"), backend="fa2")
    wrapper.plan(indptr, table.reshape(-1), last, QO_HEADS, KV_HEADS, d, PAGE, q_data_type=torch.bfloat16,
                 kv_data_type=torch.uint8, sm_scale=scale)
    out = wrapper.run(q, (k, v), kv_cache_sf=(k_sf, v_sf))
    ref = torch.stack([_attend(q[b][None], _seq(kf, table[b]), _seq(vf, table[b]), scale, None)[0]
                       for b in range(BATCH)])
    return _check(out, ref, {"packed": "lo-nibble-first", "tensor_cores": case["path"].endswith("-tc")})


def _network_failure(exc: BaseException) -> bool:
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).lower()
    if "no supported cuda architectures" in str(exc).lower():
        return False  # the architecture gate, not the download
    return any(w in text for w in ("requests", "urllib", "connection", "download", "max retries",
                                   "name resolution", "artifactory", "https://"))


def _cudnn_prefill(case: dict[str, Any]) -> dict[str, Any]:
    import flashinfer
    import torch

    d = case["head_dim"]
    k, v, table, lens = _paged(torch.bfloat16, d)
    q = torch.randn(BATCH * KV_LEN, QO_HEADS, d, device="cuda", dtype=torch.bfloat16)
    scale = 1.0 / math.sqrt(d)
    workspace = torch.zeros(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    lens4 = lens.reshape(BATCH, 1, 1, 1)
    offsets = torch.arange(0, BATCH + 1, device="cuda", dtype=torch.int32) * (KV_LEN * QO_HEADS * d)
    out, _ = flashinfer.cudnn.cudnn_batch_prefill_with_kv_cache(
        q, k, v, scale, workspace, max_token_per_sequence=KV_LEN, max_sequence_kv=KV_LEN,
        actual_seq_lens_q=lens4, actual_seq_lens_kv=lens4, block_tables=table, causal=True, return_lse=True,
        batch_offsets_q=offsets, batch_offsets_o=offsets)
    ref = torch.cat([_attend(q[b * KV_LEN:(b + 1) * KV_LEN], _seq(k, table[b]), _seq(v, table[b]), scale, 0)
                     for b in range(BATCH)])
    return _check(out, ref, {})


def _mla(case: dict[str, Any], kv_dtype: Any) -> dict[str, Any]:
    import flashinfer
    import torch

    backend = case["path"].split("-")[1]
    qo = 1 if case["phase"] == "decode" else MLA_QO
    per_seq = KV_LEN // MLA_PAGE
    n_pages = BATCH * per_seq
    ckv = torch.randn(n_pages, MLA_PAGE, CKV, device="cuda", dtype=torch.bfloat16).to(kv_dtype)
    kpe = torch.randn(n_pages, MLA_PAGE, KPE, device="cuda", dtype=torch.bfloat16).to(kv_dtype)
    q_nope = torch.randn(BATCH * qo, MLA_HEADS, CKV, device="cuda", dtype=torch.bfloat16)
    q_pe = torch.randn(BATCH * qo, MLA_HEADS, KPE, device="cuda", dtype=torch.bfloat16)
    qo_indptr = torch.arange(0, BATCH * qo + 1, qo, device="cuda", dtype=torch.int32)
    kv_indptr = torch.arange(0, n_pages + 1, per_seq, device="cuda", dtype=torch.int32)
    kv_indices = torch.arange(n_pages, device="cuda", dtype=torch.int32)
    kv_lens = torch.full((BATCH,), KV_LEN, device="cuda", dtype=torch.int32)
    scale = 1.0 / math.sqrt(128 + KPE)
    workspace = torch.zeros(128 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    wrapper = flashinfer.mla.BatchMLAPagedAttentionWrapper(workspace, backend=backend)
    causal = qo > 1
    wrapper.plan(qo_indptr, kv_indptr, kv_indices, kv_lens, MLA_HEADS, CKV, KPE, MLA_PAGE, causal, scale,
                 torch.bfloat16, kv_dtype)
    scales = {"ckv_scale": 1.0, "kpe_scale": 1.0} if kv_dtype != torch.bfloat16 else {}
    out = wrapper.run(q_nope, q_pe, ckv, kpe, **scales)
    refs = []
    for b in range(BATCH):
        c = ckv[b * per_seq:(b + 1) * per_seq].reshape(KV_LEN, 1, CKV)
        p = kpe[b * per_seq:(b + 1) * per_seq].reshape(KV_LEN, 1, KPE)
        qb = torch.cat([q_nope[b * qo:(b + 1) * qo], q_pe[b * qo:(b + 1) * qo]], dim=-1)
        refs.append(_attend(qb, torch.cat([c, p], dim=-1), c, scale, KV_LEN - qo if causal else None))
    return _check(out, torch.cat(refs), {"backend": backend})


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    if case["path"] == "fa3-gate":
        return _fa3_gate(case)
    if case["path"] == "prefill-fa3":
        return _prefill_fa3(case)
    if case["path"] == "nvfp4-prefill-fa2":
        return _nvfp4_prefill(case)
    if case["path"].startswith("nvfp4-decode"):
        return _nvfp4_decode(case)
    kv_dtype = {"bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}[case["kv_dtype"]]
    if case["path"].startswith("mla-"):
        return _mla(case, kv_dtype)
    if case["path"] == "cudnn" and case["phase"] == "prefill":
        return _cudnn_prefill(case)
    return _decode(case, kv_dtype)


"""FlashInfer's own XQA test (flashinfer-ai/flashinfer tests/attention/test_xqa.py, test_xqa, at commit
0a8300cc2fa48c015269f164d008978259b03803) accepts an fp8 KV cache at atol = rtol = 0.05 per element (0.01 for a
bf16/fp16 cache), 99 % of elements within. XQA with fp8 KV computes in fp8 (its docstring: "xqa will run fp8
calculation"), so the 3e-2 of max error over max |ref| this probe asks of bf16 is no fp8 budget: an xqa fp8-KV case
counts as correct when every element is within that atol (max_abs_err <= 0.05), stricter than the test's 99 %."""
