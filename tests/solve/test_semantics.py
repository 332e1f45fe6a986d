"""Issue 17 semantics on the shipped KB: disputed status, scoped verdicts, ok needs knowledge, q vs KV dtype,
attention features, the workspace gate, the typical profile and the order to try."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kbtool.kb import KB
from kbtool.solve.answer import Answer
from kbtool.solve.gates import effective, scope_words
from kbtool.solve.parts import KernelAnswer
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from tests.util import ROOT, load_kb, run_kb


@pytest.fixture(scope="module")
def kb() -> KB:
    return load_kb(ROOT / "records")


def ask(kb: KB, **kw: Any) -> Answer:
    a = solve(kb, build_query(**kw))
    assert isinstance(a, Answer)
    return a


def k(a: Answer, kid: str) -> KernelAnswer:
    return next(x for x in a.kernels if x.id == kid)


class _C(tuple):  # a ClaimV-shaped stand-in: only the fields `effective` reads
    verdicts = property(lambda s: s[0])
    sides = property(lambda s: s[1])
    status = property(lambda s: s[2])


def test_a_verdict_holds_only_inside_its_scope() -> None:
    c = _C(((("sm90", (("flashinfer", "0.6.18"),), None, "refuted", ("ev",)),), (("a", ("s",)),), "disputed"))
    assert effective(c, {"sm": "sm90", "flashinfer": "0.6.18"}) == ("refuted", "refuted on sm90 (flashinfer 0.6.18)")
    st, words = effective(c, {"sm": "sm90", "flashinfer": "0.7.0"})
    assert st == "disputed" and words == "disputed here; refuted on sm90 (flashinfer 0.6.18) only"
    assert effective(c, {"sm": "sm80", "flashinfer": "0.6.18"})[0] == "disputed"
    assert effective(c, {"sm": "sm90"})[0] == "disputed"  # the version is not known: not inside the scope
    plain = _C(((("sm90", (), "prefill", "verified", ("ev",)),), (), "verified"))
    assert effective(plain, {"sm": "sm90", "phase": "prefill"})[0] == "verified"
    assert effective(plain, {"sm": "sm90", "phase": "decode"})[0] == "unverified"


def test_untestable_there_leaves_a_dispute_between_sources_standing() -> None:
    sides = (("a", ("s",)), ("b", ("t",)))
    c = _C(((("sm90", (), None, "untestable", ()),), sides, "disputed"))
    assert effective(c, {"sm": "sm90"}) == ("disputed", "disputed; untestable on sm90")
    plain = _C(((("sm90", (), None, "untestable", ()),), (), "untestable"))
    assert effective(plain, {"sm": "sm90"}) == ("untestable", "untestable on sm90")


def test_a_dispute_whose_sides_all_refuse_here_is_no_dispute_here() -> None:
    from kbtool.model.common import Leaf
    from kbtool.solve.conditions import compile_condition

    only90 = compile_condition(Leaf.model_validate({"var": "sm", "in": ["sm90"]}))
    ampere = compile_condition(Leaf.model_validate({"var": "sm", "in": ["sm80", "sm86", "sm89", "sm90"]}))
    c = _C(((("sm90", (), None, "untestable", ()),), (("a", ("s",), only90), ("b", ("t",), ampere)), "disputed"))
    assert effective(c, {"sm": "sm100"})[0] == "unverified"  # both sides say it cannot run on Blackwell
    assert effective(c, {"sm": "sm80"})[0] == "disputed"  # one side says it runs on Ampere
    one_silent = _C(((("sm90", (), None, "untestable", ()),), (("a", ("s",), only90), ("b", ("t",), None)),
                     "disputed"))
    assert effective(one_silent, {"sm": "sm100"})[0] == "disputed"  # a side without a condition keeps it open


def test_scope_words_group_versions() -> None:
    vs = [("sm90", (("flashinfer", "0.6.18"),), None, "refuted", ()),
          ("sm90", (("flashinfer", "0.7.2.post1"),), None, "refuted", ())]
    assert scope_words(vs) == "refuted on sm90 (flashinfer 0.6.18, 0.7.2.post1)"


def test_refuted_on_sm90_is_not_evidence_on_sm80(kb: KB) -> None:
    a = ask(kb, gpu="a100", head_dim=128, kv="bf16", ctx="8k")
    assert k(a, "flash-attention-2").status == "ok"
    fa4 = k(a, "flash-attention-4")
    r = next(r for r in fa4.reasons if r.claim == "fa4-requires-blackwell")
    assert fa4.status == "disputed" and r.enforced and r.verification == "disputed"
    assert "sm90" in (r.verdict or "") and r.verdict.endswith("only")
    assert len(r.sides) == 2 and all(s["sources"] for s in r.sides)


def test_refuted_inside_scope_is_not_enforced(kb: KB) -> None:
    a = ask(kb, gpu="h200", head_dim=128, kv="bf16", phase="prefill", lib=["flash-attn-4=4.0.0b36"],
            kernel=["flash-attention-4"])
    fa4 = k(a, "flash-attention-4")
    assert [r.claim for r in fa4.refuted] == ["fa4-requires-blackwell"]
    assert fa4.refuted[0].verdict == "refuted on sm90 prefill (flash-attn-4 4.0.0b36)"
    assert fa4.status == "ok"


def test_a_disputed_seed_claim_does_not_reject(kb: KB) -> None:
    for gpu in ("h100", "h200", "b200"):
        a = ask(kb, gpu=gpu, model="qwen3-next-80b-a3b", ctx="128k", kv="bf16")
        fi = k(a, "flashinfer-fa2")
        assert fi.status != "rejected", gpu
        assert all(r.claim != "flashinfer-head-dim-256-512-unsupported" or r.verification == "disputed"
                   for r in fi.reasons)


def test_q_dtype_and_kv_dtype_differ(kb: KB) -> None:
    a = ask(kb, gpu="h100", ctx="128k", kv="fp8")
    for kid in ("torch-sdpa-flash", "torch-sdpa-efficient", "torch-sdpa-cudnn", "torch-sdpa-math",
                "flash-attention-2", "cudnn-frontend-sdpa"):
        assert k(a, kid).status == "rejected", kid
    # On an H200 with torch 2.11.0+cu130 a compiled flex_attention ran a bf16 query over fp8 K/V correctly,
    # refuting flex-attention-dtypes there (evidence 2026-12-01-nvidia-h200-sxm-flex-attention). That verdict
    # holds for sm90 and that release only: the default profile assumes the newest recorded torch, which nobody
    # measured, so the claim is enforced and the reason says where it was refuted.
    flex = next(r for r in k(a, "flex-attention").reasons if r.claim == "flex-attention-dtypes")
    assert flex.verification == "unverified" and "refuted on sm90" in (flex.verdict or "")
    b = ask(kb, gpu="h100", ctx="128k", kv="fp8", lib=["torch=2.11.0+cu130"], kernel=["flex-attention"])
    assert "flex-attention-dtypes" not in [r.claim for r in k(b, "flex-attention").reasons]
    assert "flex-attention-dtypes" in [r.claim for r in k(b, "flex-attention").refuted]
    assert k(a, "flashinfer-fa2").phase_status["decode"] in ("ok", "caveat")
    fa3 = k(a, "flash-attention-3")
    assert fa3.status == "caveat" and "fa3-fp8-kv-needs-fp8-query" in [c.claim for c in fa3.caveats]
    recommended = {kid for ids in a.recommended.values() for kid in ids}
    assert "flash-attention-3" in recommended and not recommended & {"torch-sdpa-math", "torch-sdpa-flash"}


def test_fa3_has_no_fp4_path(kb: KB) -> None:
    a = ask(kb, gpu="h100", ctx="32k", kv="fp4", kernel=["flash-attention-3"])
    assert k(a, "flash-attention-3").status == "rejected"


def test_ungated_math_sdpa_is_not_ok_at_long_context(kb: KB) -> None:
    a = ask(kb, gpu="mi300x", model="llama-3.1-70b", ctx="128k", kv="bf16", kernel=["torch-sdpa-math"])
    m = k(a, "torch-sdpa-math")
    assert m.phase_status["prefill"] == "rejected"
    r = next(r for r in m.reasons if r.claim == "torch-sdpa-math-score-matrix-workspace")
    assert "4 B = 4,096.0 GiB" in r.message  # 1 x 64 x 131072 x 131072 x 4 B
    b = ask(kb, gpu="mi300x", model="llama-3.1-70b", ctx="128k", kv="fp8")
    assert not (b.verdict == "yes" and "torch-sdpa-math" in b.recommended.get("prefill", []))


def test_no_knowledge_is_unknown_never_ok(kb: KB) -> None:
    a = ask(kb, gpu="h100", ctx="8k", kv="bf16", kernel=["flashinfer-cudnn"])
    c = k(a, "flashinfer-cudnn")
    assert c.status == "unknown"
    assert any(r.message == "the KB records nothing about q dtype for flashinfer-cudnn" for r in c.reasons)


def test_sinks_gate_kernels(kb: KB) -> None:
    a = ask(kb, gpu="h100", model="gpt-oss-120b", ctx="128k")
    for kid in ("torch-sdpa-flash", "torch-sdpa-cudnn", "flash-attention-2", "flashinfer-fa2"):
        st = k(a, kid).status
        assert st == "rejected" and any(r.code == "SINKS" for r in k(a, kid).reasons), kid
    assert k(a, "flash-attention-3").status == "ok"
    assert k(a, "flex-attention").status != "ok"
    v = ask(kb, gpu="a100", model="gpt-oss-120b", ctx="128k", engine="vllm")
    assert v.recommended["decode"] == ["vllm-triton-unified-attention"]


def test_assume_none_is_strict(kb: KB) -> None:
    a = ask(kb, gpu="h100", ctx="128k", kv="fp8", assume="none")
    assert "cuda" in a.depends_on and "cuda" not in a.assumed
    t = ask(kb, gpu="h100", ctx="128k", kv="fp8")
    assert t.assumed["cuda"] == "12.9" and t.assumed["head_dim"] == 128


def test_ctx_spellings_agree(kb: KB) -> None:
    a, b = ask(kb, gpu="h100", ctx="128k", kv="fp8"), ask(kb, gpu="h100", ctx="131072", kv="fp8")
    assert (a.verdict, a.recommended) == (b.verdict, b.recommended)


def test_generic_fit_advice_is_not_scoped_to_one_product(kb: KB) -> None:
    sxm = ask(kb, gpu="h100", ctx="128k", kv="fp8")
    pcie = ask(kb, gpu="h100-pcie", ctx="128k", kv="fp8")
    assert sxm.verdict == pcie.verdict
    assert not any(c.claim == "kv-cache-must-fit-before-kernel-gates" for c in sxm.caveats)


def test_headline_fits_a_terminal_and_explain_never_truncates() -> None:
    env = {"COLUMNS": "80"}
    r = run_kb("query", "--gpu", "h100", "--ctx", "128k", "--kv", "fp8", env=env)
    lines = r.out.splitlines()
    assert len(lines) <= 25 and max(len(x) for x in lines) <= 80 + 10  # an unbreakable id may overflow a little
    assert lines[0].startswith("verdict:") and any(x.startswith("assumed:") for x in lines)
    assert "None" not in r.out and "?" not in r.out
    full = run_kb("query", "--gpu", "h100", "--ctx", "128k", "--kv", "fp8", "--explain", env=env)
    assert "more (--explain)" not in full.out and "torch-sdpa-math" in full.out


def test_order_to_try(kb: KB) -> None:
    v = ask(kb, gpu="h100", model="gpt-oss-120b", ctx="128k", engine="vllm")
    assert v.recommended["prefill"][0] == "flash-attention-3"  # FLASH_ATTN first in vLLM's list on sm90
    b = ask(kb, gpu="b200", head_dim=128, kv="bf16", ctx="8k")
    assert b.recommended["prefill"][0] == "flash-attention-4"  # vLLM's default FA generation on sm100
    assert b.recommended["prefill"].index("torch-sdpa-flash") > b.recommended["prefill"].index("flashinfer-fa2")


def test_engine_handled_caveat_does_not_demote(kb: KB) -> None:
    a = ask(kb, gpu="h100", ctx="128k", kv="fp8", engine="vllm", kernel=["flash-attention-3"])
    c = next(r for r in k(a, "flash-attention-3").caveats if r.claim == "fa3-fp8-long-context-two-level-accumulation")
    assert c.handled and "two-level" in c.handled
    assert "[vllm-fa3-fp8-two-level-accumulation-on," in c.handled  # it cites the claim that settles it
    backend = next(b for b in a.backends if b.id == "vllm-flash-attn")
    assert all(r.handled for r in backend.caveats if r.claim == c.claim)  # the backend's copy too
    plain = ask(kb, gpu="h100", ctx="128k", kv="fp8", kernel=["flash-attention-3"])
    assert all(r.handled is None for r in k(plain, "flash-attention-3").caveats)
    sgl = ask(kb, gpu="h100", ctx="128k", kv="fp8", engine="sglang", kernel=["flash-attention-3"])
    assert all(r.handled is None for r in k(sgl, "flash-attention-3").caveats)  # the settling claim names vLLM


def test_handled_is_data_a_claims_handles(tmp_path: Path) -> None:
    """Without the settling claim's `handles` line the same question leaves the caveat standing."""
    import shutil

    shutil.copytree(ROOT / "records", tmp_path / "records")
    path = tmp_path / "records" / "claims" / "vllm-fa3-fp8-two-level-accumulation-on.yaml"
    text = path.read_text(encoding="utf-8")
    assert "handles: [fa3-fp8-long-context-two-level-accumulation]\n" in text
    path.write_text(text.replace("handles: [fa3-fp8-long-context-two-level-accumulation]\n", ""), encoding="utf-8")
    a = ask(load_kb(tmp_path / "records"), gpu="h100", ctx="128k", kv="fp8", engine="vllm",
            kernel=["flash-attention-3"])
    c = next(r for r in k(a, "flash-attention-3").caveats if r.claim == "fa3-fp8-long-context-two-level-accumulation")
    assert c.handled is None


def test_mla_block_size_is_the_backends_own_under_vllm(kb: KB) -> None:
    a = ask(kb, gpu="b200", model="deepseek-v3", kv="bf16", engine="vllm", gpus=8, ctx="32k")
    assert "block_size" not in a.assumed
    assert k(a, "cutlass-mla-decode").status == "ok"  # CUTLASS_MLA's 128 is what the profile picks for it
    dense = ask(kb, gpu="h100", model="llama-3.1-8b", kv="bf16", engine="vllm", ctx="8k")
    assert dense.assumed["block_size"] == 64  # vLLM 0.34.0 (the default release) makes 64 the default block size
    old = ask(kb, gpu="h100", model="llama-3.1-8b", kv="bf16", engine="vllm", ctx="8k", vllm="0.33.0")
    assert old.assumed["block_size"] == 16


def test_a_cuda_below_a_gates_minimum_is_refused(kb: KB) -> None:
    # FA-3 needs CUDA >= 12.3: --cuda 12.2 refuses it (its claim was once scoped to cuda >= 12.3, where it never fails)
    a = ask(kb, gpu="h100", kv="bf16", kernel=["flash-attention-3"], lib=["cuda=12.2"])
    assert k(a, "flash-attention-3").status == "rejected"
    assert any(r.claim == "fa3-requires-cuda-12-3" for r in k(a, "flash-attention-3").reasons)
    assert k(ask(kb, gpu="h100", kv="bf16", kernel=["flash-attention-3"], lib=["cuda=12.8"]),
             "flash-attention-3").status != "rejected"


def test_no_gate_is_scoped_away_from_the_versions_it_refuses(kb: KB) -> None:
    """A reject gate `requires: {var: L, ge: V}` scoped to library L from V on applies only where it passes."""
    from kbtool.model import Claim

    bad = []
    for c in kb:
        req = getattr(c, "requires", None)
        if not isinstance(c, Claim) or c.effect != "reject" or getattr(req, "var", None) is None:
            continue
        for s in c.scope:
            if s.library == req.var and s.introduced is not None and getattr(req, "ge", None) == s.introduced:
                bad.append(c.id)
    assert bad == []


def test_untestable_here_says_the_other_builds_verdict_holds_only_there() -> None:
    """FA-3's FP8 accuracy: untestable for the upstream build on sm90, verified on vLLM's fork. The label must not
    read as both at once ('untestable on sm90 prefill; verified on sm90 prefill (...)')."""
    c = _C(((("sm90", (("vllm-flash-attn-3", "0.24.0"),), "prefill", "verified", ("ev",)),
             ("sm90", (), "prefill", "untestable", ("ev2",))), (), "verified"))
    assert effective(c, {"sm": "sm90", "phase": "prefill"}) == (
        "untestable", "untestable on sm90 prefill; verified on sm90 prefill (vllm-flash-attn-3 0.24.0) only")


def test_a_logit_softcap_is_an_axis_the_kernels_that_take_it_answer(kb: KB) -> None:
    """Gemma 2's attention softcap (50.0 in its config) fixes the softcap axis: FA-2, FA-3 and FlashInfer take the
    cap in-kernel (their *-softcap claims), so they are not `unknown` for it; a kernel with no claim about it is."""
    a = ask(kb, gpu="h100", model="gemma-2-9b-it", ctx="8k", kv="bf16")
    for kid in ("flash-attention-2", "flash-attention-3", "flashinfer-fa2", "flashinfer-fa3"):
        assert not any("logit softcap" in r.message for r in k(a, kid).reasons), kid
        assert k(a, kid).status in ("ok", "caveat"), (kid, k(a, kid).status)
    nothing = [x for x in a.kernels if any(r.message.startswith("the KB records nothing about logit softcap")
                                           for r in x.reasons)]
    assert nothing and all(x.status == "unknown" for x in nothing)
