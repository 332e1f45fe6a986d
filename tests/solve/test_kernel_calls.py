"""The kernel an engine really calls (issue 45): its build and its call shape decide the kernel layer's say.

Each case below follows the engine's own code at that release, read in the installed wheels:
- vLLM's FLASH_ATTN_MLA decode (vllm/v1/attention/backends/mla/flashattn_mla.py forward_mqa, 0.33.0 lines 382-401,
  0.24.0 lines 346-365) calls its FA-3 fork with q=q_pe (the rope part, 64 for DeepSeek), k=the rope cache, v=the
  latent cache (512) and q_v=q_nope: FA-3 sees (64, 512), a pair fa3-head-dims allows, never (576, 512).
- vLLM's FLASH_ATTN on SM90 (vllm/v1/attention/backends/fa_utils.py get_flash_attn_version, 0.33.0 lines 139-166,
  0.24.0 lines 120-143) upgrades FA-3 to the FA-4 it bundles (vllm/vllm_flash_attn/cute) for head sizes above 256;
  that build's interface takes 8..512 on SM90 (cute/interface.py _validate_head_dims), unlike pip flash-attn-4.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from kbtool.query_cli import image
from kbtool.render.verdict import answer_summary
from kbtool.solve.calls import covers
from kbtool.solve.decision import Decision, decide
from kbtool.solve.engines.results import Pick
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from tests.solve.test_engine_vllm import DATA, points, stratified
from tests.util import ROOT

LITE = str(ROOT / "probes" / "vllm_boot" / "models" / "deepseek-v2-lite" / "config.json")


def _picked(a: Any) -> Any:
    return next(b for b in a.backends if a.engine and b.id == a.engine["selected"])


def _call(a: Any, kernel: str, phase: str) -> dict[str, Any]:
    return next(c for c in _picked(a).calls if c["kernel"] == kernel and c["phase"] == phase)


def test_deepseek_v3_on_h200_runs_flash_attn_mla_on_the_call_vllm_makes() -> None:
    a = solve(image(), build_query(gpu="h200", gpus=8, model="deepseek-v3", ctx="128k", kv="bf16", engine="vllm"))
    assert a.engine is not None and a.engine["selected"] == "vllm-flash-attn-mla"
    c = _call(a, "flash-attention-3", "decode")
    assert (c["build"], c["fork_of"], c["shape"]) == ("vllm-flash-attn-3", "flash-attn",
                                                      {"head_dim": 64, "head_dim_v": 512})
    assert c["status"] == "ok" and "q_v=q_nope" in c["call"]
    assert a.decision is not None and a.decision.case == "ENGINE"
    assert "expect a failure" not in answer_summary(a)


def test_deepseek_v2_lite_on_vllm_0_24_0_starts_as_the_h200_boot_did() -> None:
    """A vLLM 0.24.0 boot of DeepSeek-V2-Lite on an H200 selected FLASH_ATTN_MLA and started; fa3-head-dims covers
    that release's fork (vllm-flash-attn-3 0.24.0) and allows the (64, 512) call."""
    a = solve(image(), build_query(gpu="h200", model=LITE, ctx="32k", engine="vllm", vllm="0.24.0"))
    c = _call(a, "flash-attention-3", "decode")
    assert c["version"] == "0.24.0" and c["shape"] == {"head_dim": 64, "head_dim_v": 512} and c["status"] == "ok"
    assert a.verdict == "yes", answer_summary(a)


@pytest.mark.parametrize("release", ["0.27.1", "0.33.0"])
def test_head_dim_512_on_h100_runs_vllms_bundled_fa4(release: str) -> None:
    a = solve(image(), build_query(gpu="h100", head_dim=512, engine="vllm", vllm=release))
    assert a.engine is not None and a.engine["selected"] == "vllm-flash-attn"
    c = _call(a, "flash-attention-4", "decode")
    assert (c["build"], c["version"], c["status"]) == ("vllm-flash-attn-4", release, "caveat")
    assert "fa4-head-dims" in c["other_builds"]  # pip flash-attn-4's claim is shown, not applied
    assert "expect a failure" not in answer_summary(a)
    assert all(c["kernel"] != "flash-attention-3" for c in _picked(a).calls)


@pytest.mark.parametrize("head_dim", [320, 384, 448])
def test_head_dims_between_256_and_512_on_h100_fail_in_vllms_bundled_fa4(head_dim: int) -> None:
    """vLLM 0.33.0 sends an SM90 head size above 256 to its bundled FA-4 (fa_utils.py:146), whose SM90 tile table has
    entries up to 256 and one for 512 (interface.py _tile_size_fwd_sm90): the vllm-fa4 run on an H100 failed to
    compile 320, 384 and 448. The refused kernels kb names are the ones the backend calls here (FA-4), not FA-2,
    which it does not call on SM90."""
    a = solve(image(), build_query(gpu="h100", head_dim=head_dim, engine="vllm", vllm="0.33.0", ctx="8k"))
    c = _call(a, "flash-attention-4", "decode")
    assert (c["build"], c["status"], c["scoped"]) == ("vllm-flash-attn-4", "rejected", True)
    assert a.verdict == "conditional"
    assert "(vllm-flash-attn-4 0.33.0) refuse its call" in answer_summary(a)
    assert "expect a failure at first use" in answer_summary(a)


def _decision(calls: list[dict[str, Any]], runs: dict[str, list[str]] | None = None) -> Decision:
    from kbtool.solve.parts import BackendAnswer, KernelAnswer, Reason

    reason = Reason(claim="fa3-head-dims", code="HEAD_DIM", message="m", verification="verified", layer="kernel")
    kernel = KernelAnswer.__new__(KernelAnswer)
    for f, v in (("id", "flash-attention-3"), ("reasons", [reason]), ("caveats", []),
                 ("phase_status", {"decode": "rejected"})):
        setattr(kernel, f, v)
    backend = BackendAnswer(id="b", backend_name="B", status="rejected", kernels={"flash-attention-3": "rejected"},
                            reasons=[Reason(claim="", code="KERNELS_REJECTED", message="m", verification="structural",
                                            layer="engine")], engine_status="ok", calls=calls)
    pick = Pick.__new__(Pick)
    pick._set(state="selected", selected="b", decode="B", label="E 1.0")
    return decide(where="gpu", phases=["decode"], kernels=[kernel], rec={}, memory=None, utilization=0.9, over=None,
                  held=[], glob_caveats=[], pick=pick, backends=[backend], long_context=None,
                  runs={"flash-attention-3": ["HEAD_DIM"]} if runs is None else runs)


def test_a_failure_is_predicted_only_from_claims_about_the_build_called() -> None:
    scoped = {"kernel": "flash-attention-3", "phase": "decode", "build": "vllm-flash-attn-3", "version": "0.24.0",
              "status": "rejected", "scoped": True}
    assert _decision([scoped]).case == "ENGINE_KERNELS_REFUSE"
    d = _decision([])  # no call recorded: the refusal is about no particular build
    assert d.case == "ENGINE" and d.verdict == "conditional" and "kernels" in d.caveats


def test_the_kernel_check_reads_the_picked_backends_own_judgement() -> None:
    """The kernel's answer carries HEAD_DIM (another backend's call of it, say), but the picked backend's own call
    passes: no doubt, no predicted failure. The refusal that counts is the picked backend's."""
    scoped = {"kernel": "flash-attention-3", "phase": "decode", "build": "vllm-flash-attn-3", "version": "0.24.0",
              "status": "rejected", "scoped": True}
    d = _decision([scoped], runs={"flash-attention-3": []})
    assert d.case == "ENGINE" and "kernels" not in d.caveats and d.verdict == "yes"


def test_a_refusal_for_any_reason_is_the_kernel_checks_business() -> None:
    """Not only a head size: the picked backend's own call refused for its KV dtype (or its architecture, sinks...)
    by a claim about the build it calls predicts a failure; with no call recorded it is a doubt that names the
    claim. Before, only HEAD_DIM counted and both were a plain yes."""
    scoped = {"kernel": "flash-attention-3", "phase": "decode", "build": "vllm-flash-attn-3", "version": "0.24.0",
              "status": "rejected", "scoped": True}
    refusal = {"flash-attention-3": ["KV_DTYPE (fa3-fp8-kv)"]}
    d = _decision([scoped], runs=refusal)
    assert d.case == "ENGINE_KERNELS_REFUSE" and d.verdict == "conditional"
    d = _decision([], runs=refusal)
    assert d.case == "ENGINE" and d.verdict == "conditional" and "kernels" in d.caveats
    assert d.detail["refusals"] == ["KV_DTYPE (fa3-fp8-kv)"] and d.detail["unscoped"] == ["flash-attention-3"]


# ---- every recorded engine grid point ------------------------------------------------------------

GPU_OF_CC = {"8.0": "nvidia-a100-80gb-sxm", "8.6": "nvidia-a10", "8.9": "nvidia-l40s", "9.0": "nvidia-h100-sxm",
             "10.0": "nvidia-b200", "12.0": "nvidia-rtx-pro-6000-blackwell"}
DTYPE = {"bfloat16": "bf16", "float16": "fp16"}
KV = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
RELEASES = sorted(p.name for p in DATA.iterdir() if p.is_dir()) if DATA.is_dir() else []


@cache
def _claims() -> dict[str, Any]:
    img = image()
    return {c.id: c for k in img.kernels for c in img.claims(k.id)}


def queries(release: str, full: bool) -> list[dict[str, Any]]:
    """The grid's dense points as queries (head size, dtypes, the GPU of that compute capability), one per distinct
    configuration; points with sinks are left out (a query gives sinks only through a model). The MLA points are
    asked with DeepSeek-V3 at each KV dtype the grid has."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for p in points(release) if full else stratified(release):
        if p["sink"] or p["cc"] not in GPU_OF_CC or p["kv"] in ("nvfp4", "fp8_ds_mla"):
            continue
        dtype = DTYPE.get(p["dtype"], p["dtype"])
        kv = dtype if p["kv"] == "auto" else KV.get(p["kv"], p["kv"])
        if p["layout"] == "dense":
            q = {"gpu": GPU_OF_CC[p["cc"]], "head_dim": p["head_size"], "dtype": dtype, "kv": kv}
        elif p["layout"] == "mla":
            q = {"gpu": GPU_OF_CC[p["cc"]], "model": "deepseek-v3", "gpus": 8, "ctx": "32k", "kv": kv}
        else:
            continue
        out[tuple(sorted(q.items()))] = q
    return list(out.values())


def check(a: Any) -> str | None:
    """None when the answer keeps the rule: "expect a failure" only where claims about the build called refuse it."""
    text = answer_summary(a)
    d = a.decision
    if "expect a failure" in text and (d is None or d.case != "ENGINE_KERNELS_REFUSE"):
        return f"'expect a failure' from case {d.case if d else None}"
    if d is None or d.case != "ENGINE_KERNELS_REFUSE":
        return None
    picked = _picked(a)
    by_kernel = {k.id: k for k in a.kernels}
    for kid in d.detail["kernels"]:
        calls = [c for c in picked.calls if c["kernel"] == kid and c["status"] == "rejected" and c["scoped"]]
        if not calls:
            return f"{kid} refused with no call of a recorded build"
        claims = [_claims()[r.claim] for r in by_kernel[kid].reasons if r.claim in _claims()]
        if not claims or not all(covers(cl, c["build"], c["version"]) for cl in claims for c in calls):
            return f"{kid}: refusing claims {[cl.id for cl in claims]} are not about {calls[0]['build']}"
    return None


def walk(release: str, full: bool) -> list[str]:
    bad = []
    for q in queries(release, full):
        a = solve(image(), build_query(engine="vllm", vllm=release, **q))
        for ans in getattr(a, "rows", [a]):
            why = check(ans)
            if why:
                bad.append(f"{q}: {why}")
    return bad


@pytest.mark.parametrize("release", RELEASES[-3:])
def test_no_failure_is_predicted_without_a_claim_about_the_build_sample(release: str) -> None:
    assert queries(release, False)
    assert not walk(release, False)


@pytest.mark.full_grid
@pytest.mark.parametrize("release", RELEASES)
def test_no_failure_is_predicted_without_a_claim_about_the_build_full(release: str) -> None:
    assert not walk(release, True)


@pytest.mark.parametrize("release", ["0.5.17", "0.5.23"])
def test_deepseek_v3_on_h200_runs_sglangs_fa3_on_the_absorbed_mla_call(release: str) -> None:
    """SGLang's fa3 backend decodes MLA through sgl-kernel's FA-3 with q=q_rope, v=the latent cache and qv=q_nope
    (python/sglang/srt/layers/attention/flashattention_backend.py forward_decode, 0.5.23 :2366, 0.5.17 :2000): FA-3
    sees (64, 512), which its head-dim claim allows, so sglang#2587's DeepSeek-V3 on 8 x H200 is a yes, not a yes
    conditional on a kernel refused at the plain (576, 512)."""
    a = solve(image(), build_query(gpu="h200", sglang_args="python3 -m sglang.launch_server --model "
                                   "deepseek-ai/DeepSeek-V3-Base --tp 8", sglang=release))
    call = _call(a, "flash-attention-3", "decode")
    assert call["build"] == "sgl-kernel" and call["shape"] == {"head_dim": 64, "head_dim_v": 512}
    assert call["status"] == "ok"
    assert a.verdict == "yes", answer_summary(a)


R1_FP4_FLASHINFER = ("python3 -m sglang.launch_server --model nvidia/DeepSeek-R1-0528-FP4 --trust-remote-code "
                     "--quantization modelopt_fp4 --attention-backend flashinfer --kv-cache-dtype fp8_e4m3 --tp-size 4")


@pytest.mark.parametrize("release", ["0.5.17", "0.5.23"])
def test_sglangs_flashinfer_backend_runs_flashinfers_mla_wrapper_for_deepseek(release: str) -> None:
    """SGLang's flashinfer backend builds FlashInferMLAAttnBackend for an MLA model (attention_registry.py
    create_flashinfer_backend), which plans BatchMLAPagedAttentionWrapper(backend="auto") with kv_lora_rank and
    qk_rope_head_dim, page size 1 and the model dtype for q and KV, reading the cache with .to(q.dtype)
    (flashinfer_mla_backend.py, 0.5.23 :958/:822, 0.5.17 :791/:660). sglang#9704's DeepSeek-R1-FP4 with an fp8 cache on
    4 x B200 started; kb judges that call (bf16 KV, the latent 512 + rope 64), not FlashInfer's fa2/fa3 at 576."""
    a = solve(image(), build_query(gpu="b200", sglang_args=R1_FP4_FLASHINFER, sglang=release))
    assert a.engine is not None and a.engine["selected"] == "sglang-flashinfer"
    for phase in ("prefill", "decode"):
        c = _call(a, "flashinfer-mla", phase)
        assert (c["build"], c["status"], c["scoped"]) == ("flashinfer", "ok", True)
        assert c["shape"] == {"kv_dtype": "bf16", "block_size": 1}
    assert {c["kernel"] for c in _picked(a).calls} == {"flashinfer-mla"}  # fa2/fa3 are not what it runs for MLA
    assert a.decision is not None and a.decision.case == "ENGINE" and "kernels" not in a.decision.caveats
    assert a.verdict == "yes", answer_summary(a)


def test_the_mla_wrapper_refuses_what_its_backends_refuse() -> None:
    """The wrapper's own claims, without an engine: its backends take a bf16 query with fp8 KV only on SM90 (fa2/fa3),
    need compute capability 8.0 (fa2), and a latent width that is a multiple of 128."""
    def status(**q: Any) -> tuple[str, set[str]]:
        a = solve(image(), build_query(model="deepseek-r1", kernel=["flashinfer-mla"], **q))
        k = next(k for k in a.kernels if k.id == "flashinfer-mla")
        return k.status, {r.claim for r in k.reasons}

    assert status(gpu="h100", kv="fp8")[0] == "ok"
    assert status(gpu="b200", kv="bf16")[0] == "ok"
    assert status(gpu="b200", kv="fp8") == ("rejected", {"flashinfer-mla-q-kv-dtypes"})
    assert "flashinfer-mla-requires-sm80" in status(gpu="t4", kv="fp16")[1]
    assert "flashinfer-mla-requires-nvidia" in status(gpu="mi300x", kv="bf16")[1]


LLAMA_FLASHINFER = ("python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                    "--attention-backend flashinfer")


def _calls(a: Any) -> set[tuple[str, str]]:
    return {(c["kernel"], c["phase"]) for c in _picked(a).calls}


@pytest.mark.parametrize("release", ["0.5.17", "0.5.23"])
@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_sglangs_flashinfer_backend_runs_fa2_and_the_ragged_fa3_for_llama_on_h100(release: str, kv: str) -> None:
    """FlashInferAttnBackend (flashinfer_backend.py, 0.5.23 :335/:501/:2395/:2670, 0.5.17 :300/:468/:2190/:2377) asks
    FlashInfer for fa2 by name in the paged prefill and in decode, page size 1, passing an fp8 cache as fp8; only the
    ragged prefill of the new tokens asks for "auto", which FlashInfer resolves to fa3 on SM90 at head dim 128, on the
    fresh bf16 k/v. So with an fp8 cache fa3 is judged on bf16 KV in prefill (fine), not on fp8 KV in decode, where
    the plain kernel layer refuses it (flashinfer-fa3-fp8-kv-needs-fp8-query) though SGLang never calls it there."""
    a = solve(image(), build_query(gpu="h100", kv=kv, ctx="32k", sglang_args=LLAMA_FLASHINFER, sglang=release))
    assert _picked(a).id == "sglang-flashinfer"
    assert _calls(a) == {("flashinfer-fa2", "prefill"), ("flashinfer-fa2", "decode"), ("flashinfer-fa3", "prefill")}
    assert _call(a, "flashinfer-fa3", "prefill")["shape"] == {"kv_dtype": "bf16"}
    for phase in ("prefill", "decode"):
        c = _call(a, "flashinfer-fa2", phase)
        assert (c["build"], c["status"], c["scoped"], c["shape"]) == ("flashinfer", "ok", True, {"block_size": 1})
    assert _picked(a).kernels == {"flashinfer-fa2": "ok", "flashinfer-fa3": "ok"}
    assert a.verdict == "yes", answer_summary(a)


@pytest.mark.parametrize("gpu", ["a100", "l40s"])
def test_sglangs_flashinfer_backend_calls_no_fa3_off_sm90(gpu: str) -> None:
    """Off SM90 FlashInfer's "auto" is fa2 (determine_attention_backend needs cc 9.x), so SGLang's flashinfer backend
    calls fa2 alone there and fa3 is not one of its kernels."""
    a = solve(image(), build_query(gpu=gpu, ctx="32k", sglang_args=LLAMA_FLASHINFER))
    assert _calls(a) == {("flashinfer-fa2", "prefill"), ("flashinfer-fa2", "decode")}
    assert _picked(a).kernels == {"flashinfer-fa2": "ok"}


def test_sglangs_flashinfer_mla_backend_runs_the_ragged_fa3_prefill_on_h200() -> None:
    """FlashInferMLAAttnBackend's non-absorbed prefill goes through the ragged wrapper at backend "auto"
    (flashinfer_mla_backend.py 0.5.23 :284-:290): fa3 on SM90 at DeepSeek's 192/128, on the k/v it expands in bf16."""
    a = solve(image(), build_query(gpu="h200", sglang_args="python3 -m sglang.launch_server --model "
                                   "deepseek-ai/DeepSeek-V3-Base --tp 8 --attention-backend flashinfer"))
    assert _calls(a) == {("flashinfer-fa3", "prefill"), ("flashinfer-mla", "prefill"), ("flashinfer-mla", "decode")}
    c = _call(a, "flashinfer-fa3", "prefill")
    assert c["status"] == "ok" and c["shape"] == {"kv_dtype": "bf16"}


def test_the_mla_wrapper_call_is_for_dense_mla_only() -> None:
    """DeepSeek-V3.2's sparse indexer sends its attention to SGLang's DSA backends even under --attention-backend
    flashinfer; the recorded wrapper call is FlashInferMLAAttnBackend's dense one and is not made there."""
    a = solve(image(), build_query(gpu="b200", sglang_args="python3 -m sglang.launch_server --model deepseek-v3.2 "
                                   "--tp 8 --attention-backend flashinfer --context-length 32768"))
    assert _picked(a).id == "sglang-flashinfer"
    assert all(c["kernel"] != "flashinfer-mla" for c in _picked(a).calls)
