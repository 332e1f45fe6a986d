"""Conformance: kb's replay of vLLM's KV-cache planning (kbtool/solve/engines/vllm/planning.py, pool.groups,
pool.report) against every point the vllm-kv-planning probe recorded from vLLM's own code
(tests/data/vllm/<release>/kv-planning.json.gz, written by `kb probe run --probe vllm-kv-planning`): the KV cache
groups, num_blocks, "GPU KV cache size", "Maximum concurrency", and the start-up check with its exact error text.
No vLLM needed. The per-case tests below pin the cases of issue 44, each citing the vLLM lines it follows."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from kbtool.query_cli import image
from kbtool.solve.engines.vllm import conformance
from kbtool.solve.engines.vllm import planning as vllm_planning
from kbtool.solve.engines.vllm import pool as vllm_pool

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm"
RAW = sorted(DATA.glob("*/kv-planning.json.gz"))


@functools.cache
def _doc(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def _point(p: dict[str, Any]) -> vllm_planning.Point:
    return conformance._point(p)


def replay(doc: dict[str, Any], plan: vllm_planning.Planning | None = None) -> tuple[int, list[str]]:
    """(points compared, mismatches): every recorded point of one release replayed by kb
    (kbtool/solve/engines/vllm/conformance.py)."""
    return conformance.planning_mismatches(image(), doc, plan)


@pytest.mark.parametrize("path", RAW, ids=[p.parent.name for p in RAW])
def test_kb_replays_every_recorded_point_of_vllms_planning(path: Path) -> None:
    n, bad = replay(_doc(path))
    assert n > 1000
    assert not bad, f"{len(bad)} of {n} points differ; first: " + "\n".join(bad[:8])


def test_recordings_cover_the_releases_of_issue_44() -> None:
    assert {p.parent.name for p in RAW} >= {"0.19.1", "0.20.0", "0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0",
                                            "0.25.1", "0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0",
                                            "0.32.0", "0.33.0", "0.34.0"}


def test_the_replay_can_fail_a_wrong_planning_line() -> None:
    """0.33.0's points replayed with 0.24.0's line (one batch in flight, no null block) must not all agree."""
    doc = _doc(DATA / "0.33.0" / "kv-planning.json.gz")
    _, bad = replay(doc, vllm_planning.planning("0.24.0"))
    assert len(bad) > 100


def _pool(release: str, **q: Any) -> Any:
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    a = solve(image(), build_query(engine="vllm", vllm=release, **q))
    assert a.memory is not None and a.memory.pool is not None
    return a.memory


def test_gemma_3_27b_at_128k_on_an_h100_refuses_to_start_in_0_33_and_starts_in_0_24() -> None:
    """0.33.0 holds window - 1 + two in-flight batches (async scheduling on the V2 runner, config/vllm.py:587-609)
    in each of the six sliding-window groups (kv_cache_interface.py:919-944) and checks against the memory less the
    null block (kv_cache_planning.py:1533-1560): 14,726 blocks a request, more than the pool holds, so it raises.
    0.24.0 holds one batch (kv_cache_interface.py:528-537) and plans against all of it: 11,654 blocks, it starts."""
    new = _pool("0.33.0", gpu="h100", model="gemma-3-27b", ctx="128k")
    assert new.pool.starts is False and new.fits is False
    assert new.pool.error.startswith("To serve at least one request with the model's max seq len (131072), (17.98 "
                                     "GiB KV cache is needed")
    assert new.engine_report["blocks_per_request"] == 6 * (-(-(1023 + 2 * 8192) // 16) + 1) + 131072 // 16
    old = _pool("0.24.0", gpu="h100", model="gemma-3-27b", ctx="128k")
    assert old.engine_report["blocks_per_request"] == 6 * (-(-(1023 + 8192) // 16) + 1) + 131072 // 16
    assert old.pool.starts is True and old.fits is True and old.pool.error is None


def test_qwen3_next_holds_three_state_pages_a_request_with_prefix_caching_in_0_33() -> None:
    """0.33.0 turns prefix caching on for hybrid models, so the Mamba state cache is in mode "align"
    (model_executor/models/config.py:750-775): 2 state pages a request, plus the prefill checkpoint page GDN
    layers export where FlashInfer's GDN prefill runs (Hopper: qwen_gdn_linear_attn.py:148-165, 689-702;
    kv_cache_interface.py:1135-1142), in steps of 64 tokens (gdn_attn.py:34, platforms/interface.py:1089-1094).
    0.24.0 keeps mode "none": one page (kv_cache_interface.py:648-657)."""
    new = _pool("0.33.0", gpu="h100", model="qwen3-next-80b-a3b", ctx="4k", gpus=4)
    old = _pool("0.24.0", gpu="h100", model="qwen3-next-80b-a3b", ctx="4k", gpus=4)
    assert new.engine_report["mamba_state"] == {"mode": "align", "pages_per_request": 3}
    assert old.engine_report["mamba_state"] == {"mode": "none", "pages_per_request": 1}
    assert new.engine_report["block_size"] % 64 == 0
    assert new.pool.concurrency < 0.8 * old.pool.concurrency


def test_mamba_state_pages_per_release_and_gpu() -> None:
    p33, p24 = vllm_planning.planning("0.33.0"), vllm_planning.planning("0.24.0")
    assert vllm_planning.state_mode(p33, "Qwen3NextForCausalLM", "sm90", True) == ("align", 1)
    assert vllm_planning.state_mode(p33, "Qwen3NextForCausalLM", "sm80", True) == ("align", 0)  # Triton/FLA prefill
    assert vllm_planning.state_mode(p33, "NemotronHForCausalLM", "sm80", True) == ("align", 1)  # mamba_mixer2.py:1117
    assert vllm_planning.state_mode(p24, "NemotronHForCausalLM", "sm90", True) == ("none", 0)
    assert vllm_planning.state_mode(p33, "LlamaForCausalLM", "sm90", False) == ("none", 0)


def test_0_34_refuses_with_the_extensible_kv_caches_hint() -> None:
    """0.34.0 turns the extensible KV cache on by default on CUDA and words its refusal for it
    (kv_cache_planning.py:64-94, 120-134)."""
    gs = [vllm_planning.Group("full", 10, 1 << 20)]
    err = vllm_planning.check(gs, 16, 1 << 30, vllm_planning.planning("0.34.0"), vllm_planning.Point(131072, 8192))
    assert err is not None and "The extensible KV cache already takes all device memory left after the model and " \
        "its activations; decrease `max_model_len` or `max_num_seqs`" in err
    assert "Decreasing `max_model_len` also reduces what is needed." in err


def test_chunked_local_attention_divides_kv_heads_by_tp_once() -> None:
    """Llama-4 Scout's chunked local layers at tensor parallel 4: 8 KV heads, 2 a rank, one page of 16 tokens x 2
    heads x (128 + 128) x 2 bytes per layer, as vLLM's ChunkedLocalAttentionSpec holds it (probe-recorded)."""
    m = image().model("llama-4-scout-17b-16e")
    grouped = vllm_pool.groups(m, "bf16", 16, 4)
    assert grouped is not None
    assert {(g.kind, g.page_bytes) for g in grouped[0]} == {("chunked", 16 * 2 * 256 * 2), ("full", 16 * 2 * 256 * 2)}


def test_an_fp32_cache_has_four_byte_pages_as_vllm_recorded_them() -> None:
    """kv_cache_dtype auto follows a float32 model: FullAttentionSpec pages of 4-byte elements (vLLM 0.33.0
    v1/kv_cache_interface.py:589-598, state_content_size_bytes x heads); the recorded fp32 configurations' groups."""
    doc = _doc(DATA / "0.33.0" / "kv-planning.json.gz")
    case = next(c for c in doc["cases"] if c["model"] == "qwen3-8b" and c["kv"] == "fp32")
    bf16 = next(c for c in doc["cases"] if c["model"] == "qwen3-8b" and c["kv"] == "bf16")
    assert case["dtype"] == "float32" and case["groups"][0]["page"] == 2 * bf16["groups"][0]["page"] == 16 * 8 * 256 * 4
    grouped = vllm_pool.groups(image().model("qwen3-8b"), "fp32", 16)
    assert grouped is not None and grouped[0][0].page_bytes == case["groups"][0]["page"]


def test_0_32_plans_as_0_33_but_its_gdn_layers_export_no_checkpoint_page() -> None:
    """0.32.0's recorded points replay on 0.33.0's arithmetic (in-flight batches, the null block), and its hybrids
    default to prefix caching too (config/model.py:2259-2261); only Mamba-2 layers add a checkpoint page
    (mamba_mixer2.py:1107), so Qwen3-Next holds 2 state pages there, 3 in 0.33.0 on Hopper."""
    p32 = vllm_planning.planning("0.32.0")
    assert p32.release == "0.32.0" and vllm_planning.planning("0.32.5").release == "0.32.0"
    assert vllm_planning.state_mode(p32, "Qwen3NextForCausalLM", "sm90", True) == ("align", 0)
    assert vllm_planning.state_mode(p32, "NemotronHForCausalLM", "sm90", True) == ("align", 1)


def test_pages_of_different_sizes_unify_by_widening_the_smaller_pages_block() -> None:
    """Gemma-4 26B-A4B: sliding-window layers of 8 KV heads x 256 and full layers of 2 heads x 512 have pages of
    128 KiB and 64 KiB at block 16; vLLM's unify_kv_cache_spec_page_size (0.33.0 v1/core/kv_cache_planning.py:
    346-408) gives the full layers a block of 32, so every page is 128 KiB and a request's full-attention blocks are
    cdiv(len, 32). Recorded for 0.23.0 onwards by the probe (gemma-4-26b-a4b points)."""
    grouped = vllm_pool.groups(image().model("gemma-4-26b-a4b"), "bf16", 16)
    assert grouped is not None
    full = [g for g in grouped[0] if g.kind == "full"]
    assert {g.page_bytes for g in grouped[0]} == {16 * 8 * 512 * 2} and [g.block for g in full] == [32]
    pt = vllm_planning.Point(32768, 8192)
    assert vllm_planning.group_blocks(full[0], 16, 32768, vllm_planning.planning("0.33.0"), pt) == 32768 // 32


def test_0_19_sizes_a_sliding_window_v_head_as_k_so_mimo_pages_do_not_unify() -> None:
    """MiMo-V2-Flash (K head 192, V head 128): 0.19.1's SlidingWindowSpec has no head_size_v
    (v1/kv_cache_interface.py:248-290), so its sliding pages are 16 x 8 x 384 x 2 B against the full layers'
    16 x 4 x 320 x 2 B, which do not divide each other: vLLM 0.19.1 raises NotImplementedError, kb has no groups.
    0.22.0 on sizes V at its own head (SlidingWindowSpec.head_size_v) and the pages unify (full block 32)."""
    m = image().model("mimo-v2-flash")
    assert vllm_pool.groups(m, "bf16", 16, sliding_v=vllm_planning.planning("0.19.1").sliding_v) is None
    grouped = vllm_pool.groups(m, "bf16", 16, sliding_v=vllm_planning.planning("0.23.0").sliding_v)
    assert grouped is not None and {g.block for g in grouped[0] if g.kind == "full"} == {32}


def test_0_29_to_0_31_size_checkpoint_pages_but_no_mamba2_layer_exports_one() -> None:
    """0.29.0, 0.30.0 and 0.31.0 plan as 0.32.0 (the null block, MambaSpec's checkpoint pages: 0.30.0
    v1/kv_cache_interface.py:1000-1042; their 1,724 points replay on 0.32.0's arithmetic), but their mamba_mixer2.py
    stores no prefill checkpoint, so Nemotron-H holds 2 state pages a request there and 3 in 0.32.0
    (mamba_mixer2.py:1107)."""
    for release in ("0.29.0", "0.30.0", "0.31.0"):
        plan = vllm_planning.planning(release)
        assert plan.release == release and plan.null_block and plan.checkpoints
        assert vllm_planning.state_mode(plan, "NemotronHForCausalLM", "sm90", True) == ("align", 0)
    assert vllm_planning.state_mode(vllm_planning.planning("0.32.0"), "NemotronHForCausalLM", "sm90", True) == \
        ("align", 1)


def _recorded(release: str, model: str, tp: int) -> dict[str, Any]:
    return next(c for c in _doc(DATA / release / "kv-planning.json.gz")["cases"]
                if c["model"] == model and c["kv"] == "bf16" and c["tp"] == tp)


def test_a_sparse_mla_models_indexer_cache_is_one_group_with_its_latent_as_vllm_plans_it() -> None:
    """DeepSeek-V3.2: each of the 61 layers registers its indexer key cache, an MLAAttentionSpec of 128 fp8 values +
    4 scale bytes in uint8 (vLLM 0.33.0 model_executor/models/deepseek_v2.py:658-666, 731-736), before its latent
    (MLAAttentionSpec of 576 bf16, mla_attention.py:1371-1400). They do not merge (MLAAttentionSpec.merge asserts
    one cache_dtype_str and cache_role, kv_cache_interface.py:749-806), so get_kv_cache_groups puts all 122 layers
    in one UniformTypeKVCacheSpecs group (kv_cache_planning.py:1138-1147) whose block holds every layer's page
    (kv_cache_interface.py:1318-1320, kv_cache_planning.py:574-605), and the scheduler keeps the first layer's spec
    (kv_cache_utils.py:1096-1117). As vLLM 0.33.0 recorded it."""
    grouped = vllm_pool.groups(image().model("deepseek-v3.2"), "bf16", 64, 8)
    assert grouped is not None
    (g,) = grouped[0]
    assert (g.kind, g.layers, g.page_bytes) == ("mla", 122, 64 * 132)
    assert [(p, n) for p, n, _ in g.pages or ()] == [(64 * 132, 61), (64 * 576 * 2, 61)]
    case = _recorded("0.33.0", "deepseek-v3.2", 8)
    assert case["groups"] == [{"spec": "MLAAttentionSpec", "layers": 122, "block": 64, "page": 8448,
                               "uniform_type": True, "pages": [[8448, 61], [73728, 61]], "block_bytes": 5012736}]
    assert vllm_planning.bytes_per_block(grouped[0]) == case["groups"][0]["block_bytes"]
    point = next(p for p in case["points"] if p["starts"] and p["max_model_len"] == 131072)
    latent_only = ([vllm_planning.Group("mla", 61, 64 * 576 * 2)], [])  # the layout kb had before: no indexer cache
    wrong = vllm_pool.report(point["available"], latent_only, 64, _point(point), vllm_pool.accounting("0.33.0"))
    assert wrong.num_blocks != point["num_blocks"] and wrong.concurrency > point["concurrency"]



def test_a_sparse_mla_models_fp8_cache_is_flashmlas_fp8_ds_mla_latent_beside_the_indexer() -> None:
    """`--kv fp8` on DeepSeek-V3.2: FLASHMLA_SPARSE serves any fp8 cache as fp8_ds_mla (vLLM 0.33.0
    model_executor/layers/attention/mla_attention.py:359-376), whose latent row is 656 bytes (:1386-1388; 0.34.0
    v1/attention/backend.py:1017-1018; 0.19.1 v1/kv_cache_interface.py:196-200); the indexer keeps its 132-byte
    uint8 rows. As vLLM recorded it in every re-recorded release."""
    grouped = vllm_pool.groups(image().model("deepseek-v3.2"), "fp8", 64, 8)
    assert grouped is not None
    assert [(p, n) for p, n, _ in grouped[0][0].pages or ()] == [(64 * 132, 61), (64 * 656, 61)]
    spec = vllm_pool.specs(image().model("deepseek-v3.2"), "fp8", 64, 8)
    assert spec is not None and (spec["dtype"], spec["cache_dtype"]) == ("uint8", "fp8_ds_mla")
    for release in ("0.19.1", "0.33.0", "0.34.0"):
        case = next(c for c in _doc(DATA / release / "kv-planning.json.gz")["cases"]
                    if c["model"] == "deepseek-v3.2" and c["kv"] == "fp8")
        assert case["groups"][0]["pages"] == [[8448, 61], [41984, 61]]
        assert vllm_planning.bytes_per_block(grouped[0]) == case["groups"][0]["block_bytes"] == 61 * (8448 + 41984)


def test_deepseek_v3_2_on_8_h200_at_128k_shows_the_indexer_cache_and_vllms_concurrency() -> None:
    """`kb query --gpu h200 --gpus 8 --model deepseek-v3.2 --ctx 128k --engine vllm`: the memory block names the
    indexer key cache beside the latent, and the concurrency is vLLM 0.33.0's from the pool kb sizes: num_blocks =
    available // the group's block bytes (v1/core/kv_cache_planning.py:1568-1573, the pool bytes per block through
    :574-605, 61 x (8,448 + 73,728) B), a request holds cdiv(131072, 64) blocks of the one group
    (kv_cache_utils.py:1061-1093), concurrency = num_blocks / that, tokens int(concurrency x 131072)
    (kv_cache_utils.py:1120-1128). The same arithmetic replays vLLM's own recorded point at 17.3 GB."""
    import io

    from kbtool.render.query import PlainSink, render_answer
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    a = solve(image(), build_query(engine="vllm", vllm="0.33.0", gpu="h200", gpus=8, model="deepseek-v3.2",
                                   ctx="128k"))
    m = a.memory
    assert m is not None and m.pool is not None and m.pool.starts is True
    r = m.engine_report
    per_block = 61 * (64 * 132 + 64 * 576 * 2)
    blocks = m.available_bytes // per_block
    assert r["num_blocks"] == blocks and r["blocks_per_request"] == 131072 // 64
    assert r["max_concurrency"] == round(blocks / 2048, 2) == m.pool.concurrency
    assert r["kv_cache_tokens"] == int(blocks / 2048 * 131072)
    assert m.max_sequences == int(blocks / 2048)
    assert r["groups"][0]["pages"][0] == {"cache": "indexer key cache", "page_bytes": 8448, "layers": 61}
    assert "61 indexer key cache pages of 8,448 B + 61 MLA latent pages of 73,728 B" in r["text"]
    buf = io.StringIO()
    render_answer(PlainSink(buf), a)
    assert "61 indexer key cache pages" in " ".join(buf.getvalue().split())
    point = next(p for p in _recorded("0.33.0", "deepseek-v3.2", 8)["points"]
                 if p["available"] == 17_300_000_000 and p["max_model_len"] == 131072)
    grouped = vllm_pool.groups(image().model("deepseek-v3.2"), "bf16", 64, 8)
    assert grouped is not None
    rep = vllm_pool.report(point["available"], grouped, 64, _point(point), vllm_pool.accounting("0.33.0"))
    assert (rep.num_blocks, rep.tokens, rep.concurrency) == (point["num_blocks"], point["tokens"],
                                                            point["concurrency"]) == (17_300_000_000 // per_block,
                                                                                      int(3451 / 2048 * 131072),
                                                                                      3451 / 2048)


def test_an_explicit_prefix_caching_flag_sets_a_gdn_hybrids_state_mode() -> None:
    """--enable-prefix-caching on vLLM 0.24.0 (hybrids default to it off): MambaModelConfig sets mamba_cache_mode
    "align" for a model class without Mamba prefix-caching support, as Qwen3-Next / Qwen3.5 are
    (model_executor/models/config.py:417-432, commit ee0da84ab), so a request holds 2 state pages; "all" (NemotronH,
    Jamba, ...) is not modelled and keeps one. --no-enable-prefix-caching on 0.33.0 turns align off."""
    p24, p33 = vllm_planning.planning("0.24.0"), vllm_planning.planning("0.33.0")
    assert vllm_planning.state_mode(p24, "Qwen3_5MoeForConditionalGeneration", "sm120", True) == ("none", 0)
    assert vllm_planning.state_mode(p24, "Qwen3_5MoeForConditionalGeneration", "sm120", True, True) == ("align", 0)
    assert vllm_planning.state_mode(p24, "NemotronHForCausalLM", "sm90", True, True) == ("none", 0)
    assert vllm_planning.state_mode(p33, "Qwen3NextForCausalLM", "sm90", True, False) == ("none", 0)
    assert vllm_planning.state_mode(p24, "LlamaForCausalLM", "sm90", False, True) == ("none", 0)


def test_the_serve_line_carries_the_prefix_caching_flag_to_the_state_pages() -> None:
    """The same question with and without --enable-prefix-caching on 0.24.0: the flag doubles a Qwen3.6 request's
    state pages, so the concurrency vLLM reports falls."""
    from kbtool.query_cli import image as img
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    def conc(extra: str) -> float:
        q = build_query(gpu="h100", vllm_args=f"serve qwen3.6-35b-a3b --max-model-len 32768 {extra}", vllm="0.24.0")
        r = solve(img(), q).memory.engine_report  # type: ignore[union-attr]
        assert r is not None
        return float((r.get("estimate") or r)["max_concurrency"])

    assert conc("--enable-prefix-caching") < conc("") == conc("--no-enable-prefix-caching")
