"""Gate logic on the fixture KB (tests/data/kb_fixture): statuses, labels, scope, engine layer, verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool.errors import NotFoundError, UsageError
from kbtool.kb import KB
from kbtool.render.verdict import answer_summary
from kbtool.solve.answer import Answer, MultiAnswer
from kbtool.solve.parts import KernelAnswer
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from tests.util import DATA, load_kb

FIX = DATA / "kb_fixture"


@pytest.fixture(scope="module")
def kb() -> KB:
    return load_kb(FIX)


def ask(kb: KB, **kw: Any) -> Answer:
    a = solve(kb, build_query(**kw))
    assert isinstance(a, Answer)
    return a


def k(a: Answer, kid: str) -> KernelAnswer:
    return next(x for x in a.kernels if x.id == kid)


def test_reject_with_observed_and_allowed(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=96, lib=["cuda=12.8"], batch=1)
    r = next(r for r in k(a, "k-gqa").reasons if r.claim == "k-gqa-head-dim")
    assert k(a, "k-gqa").status == "rejected"
    assert (r.observed, r.allowed, r.code, r.verification) == (96, [64, 128, 256], "HEAD_DIM", "unverified")
    assert r.message == "k-gqa supports head_dim in [64, 128, 256]; got 96 (q bf16, KV bf16)"
    assert "pad" in k(a, "k-gqa").workarounds


def test_unknown_names_input_and_passing_values(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=128, batch=1, kernel=["k-gqa"], assume="none")
    ka = k(a, "k-gqa")
    assert ka.status == "unknown"
    r = next(r for r in ka.reasons if r.claim == "k-gqa-cuda")
    assert r.depends_on == ["cuda"] and r.allowed == "cuda >= 12.3"
    assert "cuda" in a.depends_on and a.verdict == "conditional"
    assert "cuda" not in a.assumed


def test_typical_profile_assumes_cuda_and_lists_it(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=128, kernel=["k-gqa"])
    assert k(a, "k-gqa").status == "ok" and a.verdict == "yes"
    assert a.assumed["cuda"] == "12.9" and a.assumed["batch"] == 1 and a.assumed["dtype"] == "bf16"
    assert "None" not in str(a.assumed.values()) and "?" not in str(a.assumed.values())


def test_typical_cuda_is_the_oldest_toolkit_every_listing_kernel_is_built_for(kb: KB) -> None:
    # k-gqa's wheels: 13.0 and 12.9; k-mla's: 12.4 and 12.8; the one toolkit both are built for from: 12.9
    from kbtool.model import Kernel

    assert ask(kb, gpu="hop", head_dim=128).assumed["cuda"] == "12.9"
    bare = KB.from_records([r.model_copy(update={"cuda_toolkits": None}) if isinstance(r, Kernel) else r for r in kb])
    a = ask(bare, gpu="hop", head_dim=128, kernel=["k-gqa"])
    assert "cuda" not in a.assumed  # no record lists toolkits: nothing is assumed, the CUDA gate is unknown
    assert k(a, "k-gqa").status != "ok"


def test_all_known_and_passing_is_ok(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=128, lib=["cuda=12.8"], batch=4, kv="bf16")
    assert k(a, "k-gqa").status == "ok"
    assert a.verdict == "yes"


def test_disputed_claims_are_enforced_and_labelled(kb: KB) -> None:
    a = ask(kb, gpu="bw", head_dim=128, lib=["cuda=12.8"], batch=1, kernel=["k-gqa"])
    r = next(r for r in k(a, "k-gqa").reasons if r.claim == "k-gqa-requires-sm90")
    assert r.verification == "disputed" and r.enforced
    assert k(a, "k-gqa").status == "disputed"  # its only failing gate is disputed: neither ok nor rejected
    assert a.verdict == "conditional" and "disputed" in answer_summary(a)


def test_refuted_claims_are_shown_not_enforced(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=128, kv="fp8", lib=["cuda=12.8"], batch=1, phase="prefill")
    kp = k(a, "k-prefill")
    assert kp.status == "ok"
    assert [r.claim for r in kp.refuted] == ["k-prefill-no-fp8"]
    assert kp.refuted[0].enforced is False and kp.refuted[0].verification == "refuted"


def test_verified_claims_cite_evidence(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=320, phase="prefill")
    r = next(r for r in k(a, "k-prefill").reasons if r.claim == "k-prefill-hd")
    assert r.verification == "verified" and r.evidence == ["ev-fixture"]


def test_untestable_label(kb: KB) -> None:
    a = ask(kb, gpu="hop", model="fx-small-mla", phase="decode")
    r = next(r for r in k(a, "k-mla").reasons if r.claim == "k-mla-requires-sm100")
    assert r.verification == "untestable" and k(a, "k-mla").status == "rejected"


def test_caveat_applies_when_when_holds(kb: KB) -> None:
    a = ask(kb, gpu="bw", head_dim=128, kv="fp8", ctx="128k", lib=["cuda=12.8"], batch=1)
    assert k(a, "k-gqa").status == "disputed"  # sm100, disputed arch gate
    a = ask(kb, gpu="hop", head_dim=128, kv="fp8", ctx="128k", lib=["cuda=12.8"], batch=1)
    ka = k(a, "k-gqa")
    assert ka.status == "caveat" and [c.claim for c in ka.caveats] == ["k-gqa-fp8-long-ctx"]
    assert a.verdict == "conditional"
    short = ask(kb, gpu="hop", head_dim=128, kv="fp8", ctx="4k", lib=["cuda=12.8"], batch=1)
    assert k(short, "k-gqa").caveats == []


def test_caveat_with_unknown_when_says_it_may_apply(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=128, kv="fp8", lib=["cuda=12.8"], batch=1)
    c = k(a, "k-gqa").caveats[0]
    assert c.depends_on == ["ctx"] and "may apply" in c.message


def test_global_caveat_on_architecture(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=128, kv="fp8", lib=["cuda=12.8"], batch=1)
    assert [c.claim for c in a.caveats] == ["sm90-note"]


def test_scope_excludes_claims_for_other_versions(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=128, lib=["cuda=12.8", "libk=1.5"], batch=16)
    assert any(r.claim == "k-gqa-old-bug" for r in k(a, "k-gqa").reasons)
    b = ask(kb, gpu="hop", head_dim=128, lib=["cuda=12.8", "libk=2.1"], batch=16)
    assert not any(r.claim == "k-gqa-old-bug" for r in k(b, "k-gqa").reasons)
    assert k(b, "k-gqa").status == "ok"


def test_layout_filters_kernels(kb: KB) -> None:
    a = ask(kb, gpu="bw", model="fx-small-mla")
    assert k(a, "k-gqa").status == "rejected"
    assert any(r.code == "ATTENTION" and r.verification == "structural" for r in k(a, "k-gqa").reasons)
    assert k(a, "k-mla").status == "ok"
    g = ask(kb, gpu="bw", head_dim=128, assume="none")
    assert k(g, "k-mla").status == "unknown"
    assert k(g, "k-mla").reasons[0].depends_on == ["attention"]


def test_phase_filter(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=128, phase="decode")
    assert k(a, "k-prefill").status == "rejected" and k(a, "k-prefill").reasons[0].code == "PHASE"


def test_mla_decode_sees_absorbed_dims(kb: KB) -> None:
    a = ask(kb, gpu="bw", model="fx-dsv3", engine="vllm", block_size=64)
    ka = k(a, "k-mla")
    assert ka.status == "ok" and ka.via == ["eng-mla"]


def test_engine_layer_reasons_from_both_layers(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=96, engine="vllm", block_size=8, lib=["cuda=12.8"], batch=1)
    ka = k(a, "k-gqa")
    layers = {r.layer for r in ka.reasons}
    assert layers == {"kernel", "engine"}
    assert any(r.claim == "eng-gqa-block" for r in ka.reasons)
    b = next(b for b in a.backends if b.id == "eng-gqa")
    assert b.status == "rejected"
    assert k(a, "k-free").status == "rejected"
    assert any(r.code == "NOT_IN_ENGINE" for r in k(a, "k-free").reasons)


def test_engine_backend_gate_alone_rejects(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=128, engine="vllm", block_size=8, lib=["cuda=12.8"], batch=1)
    assert k(a, "k-gqa").status == "rejected"
    ok = ask(kb, gpu="hop", head_dim=128, engine="vllm", block_size=16, lib=["cuda=12.8"], batch=1)
    assert k(ok, "k-gqa").status == "ok" and k(ok, "k-gqa").via == ["eng-gqa"]


def test_memory_no_fit_gives_verdict_no(kb: KB) -> None:
    a = ask(kb, gpu="hop", model="fx-llama-405b", ctx="128k")
    assert a.verdict == "no" and a.memory is not None and a.memory.fits is False
    assert "does not fit" in answer_summary(a) and "GB" in answer_summary(a)


def test_memory_numbers_fixture(kb: KB) -> None:
    a = ask(kb, gpu="bw", model="fx-llama-70b", ctx="32k", kv="bf16")
    assert a.memory is not None
    assert a.memory.kv_bytes_per_token == 327_680
    assert a.memory.kv_bytes == 327_680 * 32768
    assert a.memory.fits is True
    d = ask(kb, gpu="bw", model="fx-dsv3", ctx="4k", kv="bf16", gpus=8)
    assert d.memory is not None and d.memory.kv_bytes_per_token == 70_272


def test_flashmla_format_only_when_that_kernel_is_chosen(kb: KB, tmp_path: Any) -> None:
    a = ask(kb, gpu="bw", model="fx-dsv3", ctx="4k", kv="fp8", gpus=8)
    assert a.memory is not None and a.memory.kv_bytes_per_token == 576 * 61


def test_kernel_restriction_and_unknown_names(kb: KB) -> None:
    a = ask(kb, gpu="hop", head_dim=128, kernel=["k-gqa"])
    assert [x.id for x in a.kernels] == ["k-gqa"]
    with pytest.raises(NotFoundError) as e:
        ask(kb, gpu="hopp")
    assert e.value.fix and "hop" in e.value.fix
    with pytest.raises(NotFoundError):
        ask(kb, gpu="hop", model="llama-9")
    with pytest.raises(NotFoundError):
        ask(kb, gpu="hop", kernel=["k-nope"])
    with pytest.raises(UsageError):
        solve(kb, build_query())
    with pytest.raises(UsageError, match="unknown library"):
        ask(kb, gpu="hop", lib=["nope=1.0"])


def test_without_gpu_one_row_per_accelerator(kb: KB) -> None:
    m = solve(kb, build_query(ctx="128k", kv="fp8"))
    assert isinstance(m, MultiAnswer)
    assert [r.query["gpu"] for r in m.rows] == ["gpu-blackwell", "gpu-hopper"]
    # the answer's own verdict is the one every row gives, and none where the rows differ
    assert m.verdict == (m.rows[0].verdict if len({r.verdict for r in m.rows}) == 1 else None)


def test_rows_that_agree_give_the_answer_its_verdict(kb: KB) -> None:
    """A line that fails on every GPU is a "no" whatever GPU its poster had (issue 47: pasted lines with no GPU)."""
    from kbtool.render.verdict import word

    base = solve(kb, build_query(ctx="128k", kv="fp8"))
    rows = {r.query["gpu"]: r for r in base.rows}
    assert len({r.verdict for r in rows.values()}) == 2, "the fixture's two GPUs answer differently"
    one = rows["gpu-hopper"]
    same = MultiAnswer(query=base.query, rows=[one, one])
    word(same)
    assert same.verdict == one.verdict and same.summary.endswith(f"({one.verdict} whatever the GPU)")
    mixed = MultiAnswer(query=base.query, rows=list(rows.values()))
    word(mixed)
    assert mixed.verdict is None and "whatever the GPU" not in mixed.summary


def test_verified_reasons_say_where_their_evidence_ran() -> None:
    import json

    from tests.util import run_kb

    r = run_kb("query", "--gpu", "h100", "--kv", "bf16", "--head-dim", "512", "--phase", "prefill",
               "--kernel", "flash-attention-4", "--json")
    (k,) = json.loads(r.out)["kernels"]
    (reason,) = [x for x in k["reasons"] if x["claim"] == "fa4-head-dims"]
    # the evidence ran on sm90 with flash-attn-4 4.0.0b36 (the newest recorded release, assumed here)
    assert reason["verification"] == "verified" and reason["verified_on"] == ["sm90"]
    assert reason["verdict"] == "verified on sm90 prefill (flash-attn-4 4.0.0b36)"
    text = run_kb("query", "--gpu", "h100", "--kv", "bf16", "--head-dim", "512", "--phase", "prefill",
                  "--kernel", "flash-attention-4", "--explain").out
    assert "verified on sm90 prefill (flash-attn-4 4.0.0b36)" in text
    other = run_kb("query", "--gpu", "h100", "--kv", "bf16", "--head-dim", "512", "--phase", "prefill",
                   "--kernel", "flash-attention-4", "--lib", "flash-attn-4=4.0.0", "--json")
    (k,) = json.loads(other.out)["kernels"]
    (reason,) = [x for x in k["reasons"] if x["claim"] == "fa4-head-dims"]
    assert reason["verification"] == "unverified" and "only" in reason["verdict"]  # another release: not covered


@pytest.mark.parametrize(("kw", "missing", "give"), [
    ({"model": "qwen3-8b"}, ["ctx"], "--ctx"),  # the model gives the heads; only the context is missing
    ({"ctx": "32k"}, ["num_heads"], "--model"),
    ({}, ["ctx", "num_heads"], "--ctx --model"),
    ({"model": "qwen3-8b", "ctx": "32k", "engine": "sglang", "sglang": "9.9.9"}, ["memory left"], None),
])
def test_score_matrix_names_the_inputs_not_given(kw: dict[str, Any], missing: list[str], give: str | None) -> None:
    """The math backend's workspace gate reads heads and context; an unknown answer names the ones missing, not
    num_heads when the model is given (an SGLang answer without --ctx said 'depends on num_heads'). With both given
    and no memory sized (an unrecorded SGLang release) it says so."""
    from tests.util import RECORDS

    a = ask(load_kb(RECORDS), gpu="h100", **kw)
    r = next(r for r in k(a, "torch-sdpa-math").reasons if r.claim == "torch-sdpa-math-score-matrix-workspace")
    assert r.depends_on == missing
    assert r.allowed.endswith(f"(give {give})" if give else "(kb sizes no memory for this question)")
