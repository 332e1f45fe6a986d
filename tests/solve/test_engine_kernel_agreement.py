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


def test_a_head_size_doubt_needs_the_picked_backends_own_head_size_refusal() -> None:
    """DeepSeek-V3.2 on 8 H200s under vLLM 0.24.0: vLLM picks FLASHMLA_SPARSE (flashmla-sparse-decode,
    flashmla-prefill).
    kb's claims refuse flashmla-prefill on sm90 for architecture only; FLASHMLA_SPARSE's own engine-layer check at the
    prefill head size (192) was merged into that kernel's answer as HEAD_DIM, and the old check read it there and
    said "kb's kernel claims refuse this head size" for flashmla-prefill: a doubt about a head size no kernel claim
    refuses. A non-head-size refusal is not the doubt this check words (decision.py), so the engine's answer stands."""
    a = solve(image(), build_query(gpu="h200", gpus=8, model="deepseek-v3.2", ctx="4096", engine="vllm",
                                   vllm="0.24.0"))
    picked = _picked(a)
    assert picked.id == "vllm-flashmla-sparse" and picked.kernels.get("flashmla-prefill") == "rejected"
    prefill = next(k for k in a.kernels if k.id == "flashmla-prefill")
    assert any(r.code == "HEAD_DIM" and r.layer == "engine" for r in prefill.reasons)  # the engine's, merged in
    assert not any(r.code == "HEAD_DIM" and r.layer == "kernel" for r in prefill.reasons)
    assert a.decision is not None and "kernels" not in a.decision.caveats
    assert not any(r.code == "KERNELS_DOUBTED" for r in a.caveats)
    assert a.verdict == "yes"
