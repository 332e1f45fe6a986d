"""The engine's pick and the kernel layer must agree, or the answer says which holds (issue 26)."""

from __future__ import annotations

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
