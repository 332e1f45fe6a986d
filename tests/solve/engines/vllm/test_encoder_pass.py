"""vLLM's start-up encoder pass for a multimodal model (kbtool/solve/engines/vllm/encoder_pass.py, issue 44).

Each case follows a line of vLLM's code (the 0.24.0 wheel, git ee0da84ab, unless named): the item count and budget
(multimodal/encoder_budget.py:140-186, v1/core/encoder_cache_manager.py:269-318, config/scheduler.py:248-249), the
tokens per item (models/qwen2_vl.py:965-1016, qwen3_vl.py:963-988, gemma3_mm.py:194-210), the runners that make the
pass (v1/worker/gpu_model_runner.py:6239-6311; v1/worker/gpu/model_runner.py:652 has none in 0.24.0, :1022 in
0.33.0 has it) and --skip-mm-profiling (gpu_model_runner.py:6243).
"""

from __future__ import annotations

from typing import Any

import pytest

from kbtool.solve.engines.vllm import encoder_pass as ep
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.engines.vllm.budget import encoder_pass as fit_pass
from kbtool.store.records import load_tree
from tests.util import ROOT


def _models() -> dict[str, Any]:
    root = ROOT / "records"
    return {x.record.id: x.record for x in load_tree(root, [root / "models"]).loaded if x.record}


MODELS = _models()
QWEN36 = MODELS["qwen3.6-35b-a3b-nvfp4"]
GEMMA = MODELS["gemma-3-27b"]
CLUB = {"limit_mm_per_prompt": '{"image":2,"audio":0}'}  # club-3090#612's serve line


def test_the_qwen_image_of_most_features_is_the_processors_longest_edge_over_32_squared() -> None:
    """16777216 pixels / (16 x 2)^2 = 16384 = 128 x 128 tokens: the budget vLLM logs for Qwen3.x checkpoints
    ("a budget of 16384 tokens, and profiled with 1 image items", noonghunna/club-3090#1047)."""
    p = QWEN36.encoders[0].profile.model_dump()
    assert ep.tokens_per_item(p) == {"image": 16384, "video": 12288}  # video: 25165824 / 2 / 32^2
    got, why = ep.encoder_pass(QWEN36, CLUB, 8192, 1, 131072)
    assert got is not None and not why
    assert (got.modality, got.items, got.tokens, got.patches) == ("image", 1, 16384, 65536)


def test_an_item_count_with_no_wide_factor_pair_steps_down() -> None:
    """get_image_size_with_most_features: 401 tokens factor only as 1 x 401 (ratio over 200), so 400 = 20 x 20."""
    assert ep.factor_pair_tokens(401 * 32 * 32, 32) == 400
    assert ep.factor_pair_tokens(200 * 32 * 32, 32) == 200  # 10 x 20


def test_the_items_fill_the_budget_unless_the_requests_and_limits_cap_them() -> None:
    """_get_max_items: min(budget // tokens, max_num_seqs x max(1, min(limit, max_model_len // tokens))), at least 1;
    Gemma 3's 256-token images fill an 8192-token budget 32 times."""
    assert ep.encoder_pass(GEMMA, {}, 8192, 1024, 131072)[0].items == 32
    assert ep.encoder_pass(GEMMA, {}, 16384, 1024, 131072)[0].items == 64
    assert ep.encoder_pass(GEMMA, {"limit_mm_per_prompt": '{"image": 3}'}, 8192, 2, 131072)[0].items == 6
    assert ep.encoder_pass(GEMMA, {}, 8192, 1, 1024)[0].items == 4  # max_model_len // 256
    assert ep.encoder_pass(GEMMA, {}, 8192, 1, 100)[0].items == 1  # never below one item
    one = ep.encoder_pass(GEMMA, {}, 8192, 1024, 131072)[0]
    assert one.patches == 32 * (896 // 14) ** 2


def test_the_modality_with_the_most_tokens_is_profiled_among_those_allowed() -> None:
    """get_modality_with_max_tokens over the modalities whose limit is above 0 (unset: 999)."""
    wide = QWEN36.model_copy(deep=True)
    prof = wide.encoders[0].profile  # a video processor wider than the image one
    wide.encoders[0].profile = prof.model_copy(update={"video_max_pixels": 234881024})
    got = ep.encoder_pass(wide, {}, 8192, 1, 262144)[0]
    assert got.modality == "video" and got.tokens > 16384
    assert ep.encoder_pass(wide, {"limit_mm_per_prompt": '{"video": 0}'}, 8192, 1, 262144)[0].modality == "image"
    # the budget takes the item's tokens where they exceed max_num_batched_tokens: one item, never zero
    assert got.items == 1


def test_a_tower_without_the_processor_limits_is_not_sized() -> None:
    got, why = ep.encoder_pass(MODELS["qwen3-vl-8b"], {}, 8192, 1024, 32768)
    assert got is None and "pixel limits are not recorded" in why
    got, why = ep.encoder_pass(MODELS["qwen2.5-vl-7b"], {}, 8192, 1024, 32768)
    assert got is None and "Qwen2_5_VisionTransformer" in why


def test_the_peak_per_patch_is_the_larger_block_phase_plus_the_pixels() -> None:
    """Qwen3_VisionBlock with Qwen2_5_VisionAttention (qwen3_vl.py:414-466, qwen2_5_vl.py): attention 4H + 8H/tp,
    MLP 4H + 2I/tp, pixels 3 x 2 x 16^2, and beside the block (0.26.0 qwen3_vl.py:667-683, :738-740) the rotary
    cos/sin tables, head_dim values a patch (1152 / 16 = 72); SigLIP (siglip.py:478-575): attention 4H + 4H/tp,
    MLP 4H + 2I/tp."""
    q = QWEN36.encoders[0].profile.model_dump()
    assert ep.bytes_per_patch(q, 1) == (2 * (12 * 1152 + 72 + 1536), "attention")
    assert ep.bytes_per_patch(q, 2) == (2 * (4 * 1152 + 4 * 1152 + 72 + 1536), "attention")
    assert ep.bytes_per_patch(q, 8) == (2 * (4 * 1152 + 8 * 144 + 72 + 1536), "attention")  # MLP: 4H + 2 x 538
    g = GEMMA.encoders[0].profile.model_dump()
    assert ep.bytes_per_patch(g, 1) == (2 * (4 * 1152 + 2 * 4304 + 3 * 14 * 14), "MLP")


def test_a_qwen3_vl_tower_peaks_with_its_deepstack_features_alive() -> None:
    """0.26.0 qwen3_vl.py:821-840: each deepstack merger's output, [patches / 4, out_hidden], is kept in a list to
    the final concatenation, so the blocks after the last deepstack index peak with all three: Qwen3-VL-4B
    (H 1024, I 4096, head_dim 64, out_hidden 2560) holds 3 x 2560 / 4 = 1920 values a patch more. With them, the
    tables and the cuBLAS workspace its pass over one 16,384-token image is 1.961 GiB; vLLM 0.26.0 logged 1.9619
    GiB where the pass alone set the profile peak (evidence 2026-12-07-nvidia-h100-sxm-vllm-boot-14,
    qwen3-vl-4b-eager-kvauto-u90-c32k-v1runner-mns1)."""
    q = MODELS["qwen3-vl-4b"].encoders[0].profile.model_dump()
    assert ep.bytes_per_patch(q, 1) == (2 * (12 * 1024 + 64 + 1920 + 1536), "MLP")
    got = ep.encoder_pass(MODELS["qwen3-vl-4b"], {}, 8192, 1, 32768,
                          workspace=vllm_pool.CUBLAS_WORKSPACE_BYTES)[0]  # as budget.py asks it
    assert got is not None and got.patches == 65536
    assert got.peak == 65536 * 31616 + vllm_pool.CUBLAS_WORKSPACE_BYTES
    assert abs(got.peak / (1 << 30) - 1.9619) < 0.005


def test_the_profile_peak_is_the_pass_or_the_text_steps_with_the_kept_outputs() -> None:
    """The outputs stay in encoder_cache until the profile run ends (gpu_model_runner.py:6296, :6311)."""
    got = ep.encoder_pass(QWEN36, CLUB, 8192, 1, 131072)[0]
    assert got.outputs == 16384 * 2048 * 2
    assert got.profile_peak(0) == got.peak
    assert got.profile_peak(got.peak) == got.peak + got.outputs


@pytest.mark.parametrize("release, runner, makes", [
    ("0.24.0", "V1", True), ("0.24.0", "V2", False), ("0.26.0", "V2", False), ("0.33.0", "V2", True),
    ("0.34.0", "V2", True)])
def test_the_runners_that_make_the_pass_are_each_releases_record(release: str, runner: str, makes: bool) -> None:
    acct = vllm_pool.accounting(release)
    assert acct.encoder_pass_where is not None  # read in that release's code, cited in its record
    assert ep.applies(acct.encoder_pass, runner, {}) is makes
    assert ep.applies(acct.encoder_pass, runner, {"skip_mm_profiling": True}) is False


def test_a_release_whose_code_was_not_read_says_so() -> None:
    acct = vllm_pool.accounting("0.28.0")  # its accounting line has no encoder_pass
    assert (acct.encoder_pass, acct.encoder_pass_where) == ("V1", None)
    _mm, notes = fit_pass(QWEN36, acct, "V1", dict(CLUB), 8192, 1, 131072, 1, None)
    assert any("not read in its code" in n for n in notes)


def test_the_reserve_grows_by_the_pass_over_the_text_peak() -> None:
    acct = vllm_pool.accounting("0.24.0")
    mm, _ = fit_pass(QWEN36, acct, "V1", dict(CLUB), 8192, 1, 131072, 1, None)
    base, _ = vllm_pool.reserve(QWEN36, 8192, 1, acct=acct, run="V1")
    act, _ = vllm_pool.activation_bytes(QWEN36, 8192, 1, acct=acct, run="V1")
    with_pass, words = vllm_pool.reserve(QWEN36, 8192, 1, acct=acct, run="V1", mm=mm)
    assert mm is not None and with_pass - base == mm.profile_peak(act) - act > 1e9
    assert "encoder pass 1 image item x 16,384 tokens" in words
    # a text-only serve line (every modality at 0) loads no tower and makes no pass
    assert fit_pass(QWEN36, acct, "V1", {}, 8192, 1, 131072, 1, "--limit-mm-per-prompt image: 0")[0] is None


def test_the_answer_sizes_the_pass_from_the_serve_line() -> None:
    from kbtool.query_cli import image
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    line = ("serve nvidia/Qwen3.6-35B-A3B-NVFP4 --max-model-len 131072 --kv-cache-dtype fp8 --limit-mm-per-prompt "
            "'{\"image\":2,\"audio\":0}' --max-num-batched-tokens 8192 --max-num-seqs 1")

    def reserve(extra: str) -> int:
        a = solve(image(), build_query(gpu="rtx-5090", vllm_args=line + extra, lib=["vllm=0.24.0"]))
        assert a.memory is not None and a.memory.reserve_bytes is not None
        return int(a.memory.reserve_bytes)

    mm = ep.encoder_pass(QWEN36, CLUB, 8192, 1, 131072, workspace=vllm_pool.CUBLAS_WORKSPACE_BYTES)[0]
    act, _ = vllm_pool.activation_bytes(QWEN36, 8192, 1, acct=vllm_pool.accounting("0.24.0"), run="V1")
    assert reserve("") - reserve(" --skip-mm-profiling") == mm.profile_peak(act) - act


def test_the_extensible_cache_of_0_34_0_is_sized_without_the_pass() -> None:
    """0.34.0 sizes its extensible KV cache after warm-up on the transient peak of sizing steps that carry no
    multimodal input (v1/worker/gpu/warmup.py:483-545, mm_features=[]; gpu_worker.py:1022-1092): the pool is the
    same with and without the pass, and only the capacity the first start-up check plans on loses it."""
    import re

    from kbtool.query_cli import image
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    line = ("serve Qwen/Qwen3.5-35B-A3B --max-model-len 32768 --gpu-memory-utilization 0.9 --max-num-batched-tokens "
            "4096 --max-num-seqs 32")

    def memory(extra: str) -> tuple[int, int]:
        a = solve(image(), build_query(gpu="h100", vllm_args=line + extra, lib=["vllm=0.34.0"]))
        assert a.memory is not None and a.memory.available_bytes is not None
        first = re.search(r"plans first on ([\d,]+) B", a.memory.formula)
        assert first is not None
        return int(a.memory.available_bytes), int(first.group(1).replace(",", ""))

    (pool, first), (pool_skip, first_skip) = memory(""), memory(" --skip-mm-profiling")
    assert pool == pool_skip
    model = MODELS["qwen3.5-35b-a3b"]
    mm = ep.encoder_pass(model, {}, 4096, 32, 32768, workspace=vllm_pool.CUBLAS_WORKSPACE_BYTES)[0]
    acct = vllm_pool.accounting("0.34.0")
    act, _ = vllm_pool.activation_bytes(model, 4096, 32, acct=acct, run="V2")
    assert first_skip - first == mm.profile_peak(act) - act > 0


def _mm_profile_rows() -> list[dict[str, Any]]:
    import json

    cases = {c["id"]: c for c in json.loads((ROOT / "probes/vllm_boot/cases.json").read_text(encoding="utf-8"))}
    path = ROOT / "tests/probe/fixtures/vllm_mm_profile/0.26.0.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [dict(r, model=cases[r["id"]]["model"]) for r in rows]


@pytest.mark.parametrize("row", _mm_profile_rows(), ids=lambda r: r["id"])
def test_the_pass_is_the_dummy_batch_vllm_builds_for_the_models_folder(row: dict[str, Any]) -> None:
    """vLLM 0.26.0's own MultiModalBudget and dummy-input builder, run on a CPU on each multimodal boot case's model
    folder (probes/vllm_boot/mm_profile.py; tests/probe/fixtures/vllm_mm_profile/README.md): kb's pass, sized from
    the model record alone, profiles the same modality with the same tokens per item, items and tower sequence length,
    and counts the same pixel values per patch. Qwen3-VL-4B's record needs the processors' pixel limits for this (the
    checkpoint's size.longest_edge, qwen2_vl.py:948-1010 and qwen3_vl.py:947-973 in 0.26.0)."""
    model = MODELS[row["model"]]
    kw = row["kwargs"]
    got, why = ep.encoder_pass(model, {}, kw["max_num_batched_tokens"], kw["max_num_seqs"], kw["max_model_len"])
    assert got is not None, why
    p = model.encoders[0].profile.model_dump()
    assert {m: n for m, n in ep.tokens_per_item(p).items() if n} == row["tokens_per_item"]
    assert (got.modality, got.items, got.tokens) == (row["modality"], row["items"],
                                                     row["tokens_per_item"][row["modality"]])
    assert max(kw["max_num_batched_tokens"], got.tokens) == row["encoder_budget"]
    assert got.patches == row["patches"]
    pixels = row["item_tensors"]["pixel_values"]
    assert pixels["dtype"] == "bfloat16"  # ACT_BYTES: the pixels in the model dtype
    per_patch = pixels["shape"][1] if len(pixels["shape"]) == 2 else 3 * p["patch_size"] ** 2
    assert per_patch == 3 * p["temporal_patch_size"] * p["patch_size"] ** 2


def test_qwen3_6_27b_profiles_the_image_vllm_logs_for_it() -> None:
    """noonghunna/club-3090#127 serves Qwen3.6-27B (this record's alias) with max_num_batched_tokens 8192,
    max_num_seqs 4 and no --limit-mm-per-prompt, and vLLM logs "a budget of 16384 tokens, and profiled with 1 image
    items": the budget is max(max_num_batched_tokens, the most tokens of one item) (encoder_budget.py:140-186), so the
    record's processor limit must give 16,384 tokens an image, one item. Without a limit kb did not size the pass at
    all, though vLLM makes it (gpu_model_runner.py:6239-6296)."""
    m = MODELS["qwen3.5-27b"]
    got, why = ep.encoder_pass(m, {}, 8192, 4, 262144)
    assert got is not None, why
    assert (got.modality, got.items, got.tokens) == ("image", 1, 16384)
    assert max(8192, got.tokens) == 16384  # the budget vLLM logged
