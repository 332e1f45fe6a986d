"""The engine's pick and the kernel layer must agree, or the answer says which holds (issue 26)."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool.query_cli import image
from kbtool.render.verdict import answer_summary
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve


def test_a_backend_vllm_picks_whose_every_kernel_kb_rejects_is_not_a_plain_yes() -> None:
    """B200, head size 320: vLLM's FLASH_ATTN falls back from FA-4 to FA-2 there (fa_utils.py:193-209 at 0.33.0),
    and kb's claims refuse both kernels; but kb records no call of this backend on SM100, so the refusal is about no
    build vLLM is known to call: a conditional yes with the doubt named, not a predicted failure (issue 45)."""
    a = solve(image(), build_query(gpu="b200", ctx="32k", head_dim=320, engine="vllm"))
    picked = next(b for b in a.backends if a.engine and b.id == a.engine["selected"])
    assert picked.status == "rejected"  # the premise: every kernel this backend runs is rejected here
    assert a.verdict == "conditional"
    assert "expect a failure" not in answer_summary(a)
    assert any(r.code == "KERNELS_DOUBTED" and r.subject == picked.id for r in a.caveats)


def test_a_backend_with_a_kernel_that_passes_stays_yes() -> None:
    a = solve(image(), build_query(gpu="h100", ctx="32k", head_dim=128, engine="vllm"))
    assert a.verdict == "yes" and not any(r.code == "KERNELS_REJECTED" for r in a.caveats)



def test_another_backends_call_does_not_clear_the_picked_backends_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSeek-V3.2 on 8 H200s: vLLM picks FLASH_ATTN_MLA_SPARSE. With its recorded call of FA-3 taken away, its FA-3
    is judged plainly, at the latent's 576/512, and refused for head size: a doubt (no call recorded). FA-3's own
    answer stays ok through other backends' recorded calls (FLASH_ATTN_MLA's decode at 64/512, FLASH_ATTN's prefill
    at 192/128), which vLLM does not make for this model's decode; they must not clear the picked backend's doubt.
    Before the kernel check read the picked backend's own judgement it read FA-3's answer, and this was a plain yes
    (so was the shipped answer, before FLASH_ATTN_MLA_SPARSE's call was recorded)."""
    from kbtool.solve.image import Image

    real = Image.backends

    def without_its_call(self: Image, engine: str) -> list[Any]:
        out = real(self, engine)
        for b in out:
            if b.id == "vllm-flash-attn-mla-sparse":
                b.calls = []
        return out

    q = build_query(gpu="h200", gpus=8, model="deepseek-v3.2", ctx="4096", engine="vllm")
    shipped = solve(image(), q)
    assert shipped.verdict == "yes" and _picked(shipped).calls  # with its call recorded: FA-3 at 64/512 passes
    monkeypatch.setattr(Image, "backends", without_its_call)
    a = solve(image(), q)
    picked = _picked(a)
    assert picked.id == "vllm-flash-attn-mla-sparse" and not picked.calls
    assert picked.kernels == {"flash-attention-3": "rejected"}  # the premise: its one kernel refused as it runs it
    assert next(k for k in a.kernels if k.id == "flash-attention-3").status == "ok"  # through other backends' calls
    assert a.verdict == "conditional" and a.decision is not None and a.decision.case == "ENGINE"
    assert a.decision.detail["unscoped"] == ["flash-attention-3"]
    assert any(r.code == "KERNELS_DOUBTED" and r.subject == picked.id for r in a.caveats)
    assert "expect a failure" not in answer_summary(a)


def _picked(a: Any) -> Any:
    return next(b for b in a.backends if a.engine and b.id == a.engine["selected"])


def test_flashmla_sparse_on_hopper_is_judged_on_the_calls_vllm_makes() -> None:
    """DeepSeek-V3.2 on 8 H200s under vLLM 0.24.0 picks FLASHMLA_SPARSE. Its prefill is flash_mla_sparse_fwd and its
    fp8 decode flash_mla_with_kvcache(is_fp8_kvcache=True, indices=...) on the FlashMLA fork in the wheel
    (flashmla_sparse.py:846 and :803 at 0.24.0; :1469 and :1357 at 0.34.0). kb's claims that refuse them on sm90 are
    about upstream FlashMLA: dense (MHA-mode) prefill on SM100 only (flashmla-prefill-dense-sm100) and seed 001's
    2026.09.30 release (flashmla-requires-sm100-cuda-13-1); neither covers the bundled build, so the calls are
    caveats and the engine's yes stands for the backend vLLM runs."""
    q = build_query(gpu="h200", gpus=8, model="deepseek-v3.2", ctx="4096", kv="fp8", engine="vllm", vllm="0.24.0")
    a = solve(image(), q)
    picked = _picked(a)
    assert picked.id == "vllm-flashmla-sparse"
    assert {(c["kernel"], c["build"]) for c in picked.calls} == {("flashmla-sparse-decode", "vllm-flashmla"),
                                                                 ("flashmla-prefill", "vllm-flashmla")}
    assert picked.kernels == {"flashmla-sparse-decode": "caveat", "flashmla-prefill": "caveat"}
    assert a.verdict == "yes" and not any(r.code.startswith("KERNELS_") for r in a.caveats)

    assert solve(image(), build_query(gpu="h200", gpus=8, model="deepseek-v3.2", ctx="4096", kv="fp8",
                                      engine="vllm", vllm="0.34.0")).verdict == "yes"


def test_flashmla_fp8_kv_on_hopper_runs_vllms_dense_fp8_extension() -> None:
    """DeepSeek-R1 with an fp8 KV cache on 8 H200s under vLLM 0.34.0 picks FLASHMLA. FlashMLA's dense decode takes no
    fp8 KV (flashmla-dense-decode-kv-dtype), but vLLM does not call it there: a quantized cache goes to its own dense
    FP8 extension, _flashmla_extension_C.fwd_kvcache_mla_fp8 (flashmla.py:310-322 at 0.34.0, :315 at 0.24.0), which
    the vllm-flashmla probe ran on an H200 (evidence 2026-12-01-nvidia-h200-sxm-vllm-flashmla, dense-fp8 cases OK).
    The refusal is about another build: a caveat, and the engine's yes stands."""
    a = solve(image(), build_query(gpu="h200", gpus=8, model="deepseek-r1", ctx="4096", kv="fp8", engine="vllm"))
    picked = _picked(a)
    assert picked.id == "vllm-flashmla"
    assert [(c["kernel"], c["build"]) for c in picked.calls] == [("flashmla-dense-decode", "vllm-flashmla-extension")]
    assert picked.kernels == {"flashmla-dense-decode": "caveat"}
    assert a.verdict == "yes"
    b = solve(image(), build_query(gpu="h200", gpus=8, model="deepseek-r1", ctx="4096", kv="bf16", engine="vllm",
                                   kernel=["flashmla-dense-decode"]))
    assert b.verdict in ("yes", "conditional")  # a bf16 cache is the plain call (vllm-flashmla), not the extension


@pytest.mark.parametrize(("kw", "builds"), [
    ({"model": "mimo-v2-flash", "gpus": 8, "ctx": "4096"}, {"vllm-flash-attn-4"}),  # sinks, 192/128
    ({"head_dim": 80, "kv": "fp8", "ctx": "32k"}, {"vllm-flash-attn-4"}),
])
def test_flash_attn_on_blackwell_calls_fa4_not_fa2(kw: dict[str, Any], builds: set[str]) -> None:
    """On cc 10.x vLLM's FLASH_ATTN prefers FA-4 (fa_utils.py:102-104 at 0.34.0, :81 at 0.24.0) and keeps it at head
    sizes up to 128 and at 192/128 (the TMEM fallback to FA-2 at :193-208). kb recorded no call there and judged the
    backend by FA-2 alone: refused for sinks (MiMo-V2-Flash) or an fp8 KV cache, so every kernel it runs looked
    refused. FA-2 is not what vLLM calls in these cases."""
    a = solve(image(), build_query(gpu="b200", engine="vllm", **kw))
    picked = _picked(a)
    assert picked.id == "vllm-flash-attn"
    assert {c["build"] for c in picked.calls} == builds and picked.kernels["flash-attention-4"] == "ok"
    assert a.verdict == "yes"


def test_a_release_no_call_was_read_in_is_judged_as_without_calls() -> None:
    """FLASH_ATTN's FA-3 call is recorded from 0.24.0, the first wheel read (fa_utils.py:146 at 4ba787ec9). Under
    vLLM 0.20.0 no call of FA-3 was read, and the backend was judged as calling no FA-3 at all: on an H200 with fp8
    KV only FA-2 was left, refused for its dtypes, so every kernel looked refused (887 answers over 0.19.1-0.23.0 in
    the release sweep). A release outside every call's scope is one kb has not read: the plain judgement holds."""
    a = solve(image(), build_query(gpu="h200", model="llama-3.1-8b", kv="fp8", ctx="4096", engine="vllm",
                                   vllm="0.20.0"))
    picked = _picked(a)
    assert picked.id == "vllm-flash-attn" and not picked.calls
    assert picked.kernels["flash-attention-3"] in ("ok", "caveat")
    assert a.verdict == "yes"
