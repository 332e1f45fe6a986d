"""kb's SGLang resolution (kbtool/solve/engines/sglang/resolve.py, records sglang-*) against SGLang's own, on the grids
the sglang-resolve probe recorded (tests/data/sglang/<release>/<platform>.json.gz: SGLang's ServerArgs
resolution over model x flags on one platform, written by `kb probe run --probe sglang-resolve`). No SGLang is
needed. Every recorded point is replayed and must agree on the prefill and decode backends, page size, KV dtype,
DSA sub-backends, or the error (type and exact message); the memory settings (mem_fraction_static,
chunked_prefill_size, decode CUDA-graph max batch) are compared too. The per-field agreement is printed
(pytest -s).
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from typing import Any

import pytest

from kbtool.kb import load_kb
from kbtool.probe.judges import sglang_resolve as grid_judge
from kbtool.solve.engines.sglang import resolve as sr
from kbtool.solve.engines.sglang.facts import model_facts
from kbtool.solve.image import Image
from kbtool.solve.imagebuild import image_of
from probes import sglang_resolve as grid
from tests.util import RECORDS, ROOT

DATA = ROOT / "tests" / "data" / "sglang"
RELEASES = ("0.5.23", "0.5.22", "0.5.21", "0.5.20", "0.5.19", "0.5.18", "0.5.17")
# claims whose refusal the recorded grid does not reach (no context parallelism, no Gemma 4 or LFM2 model, no DSA
# model with learnable sinks, no FA-4 decode with an FP4 KV cache that gets past the earlier KV4 checks, ...): each
# must still name its source, and an entry that the grid does reach is stale and fails ("id@release": that release
# only)
NOT_IN_GRID = {
    "sglang-trtllm-mha-prefill-cp-sm100", "sglang-gemma4-backends", "sglang-lfm2-no-triton",
    "sglang-dsa-sinks-bf16-kv", "sglang-dsa-sinks-prefill-flashmla-sparse", "sglang-dsa-sinks-decode-flashmla-sparse",
    "sglang-dsa-tilelang-fp8-sm89", "sglang-fp4-kv-fa4-mla-decode@0.5.21", "sglang-fp4-kv-fa4-mla-decode@0.5.22",
    "sglang-fp4-kv-fa4-mla-decode@0.5.23",
    "sglang-fp4-kv-cuda-only@0.5.23",  # 0.5.23 refuses nvfp4 on ROCm earlier, in the NVFP4 prefill check
    # 0.5.21 and 0.5.22 run 0.5.23's NVFP4 prefill check first too (kv_cache_hook.py:34-95): the grid's nvfp4 lines
    # stop there, so the KV4 checks after it (one claim each for 0.5.17-0.5.23) show on 0.5.17-0.5.20's grids only
    "sglang-fp4-kv-cuda-only@0.5.21", "sglang-fp4-kv-cuda-only@0.5.22",
    "sglang-fp4-kv-fa4-mha-decode@0.5.21", "sglang-fp4-kv-fa4-mha-decode@0.5.22", "sglang-fp4-kv-fa4-mha-decode@0.5.23",
    "sglang-fp4-kv-mha-backends@0.5.21", "sglang-fp4-kv-mha-backends@0.5.22", "sglang-fp4-kv-mha-backends@0.5.23",
    "sglang-exaone4-backends",  # no EXAONE model here; the sglang-pool recording shows it (pool replay test)
}


@cache
def image() -> Image:
    return image_of(load_kb(RECORDS)[0])


@cache
def recorded(release: str) -> list[dict[str, Any]]:
    return grid.recorded(release, DATA)


def of(release: str, plat: str) -> dict[str, Any]:
    return next(d for d in recorded(release) if plat in d["platforms"])


def replay(release: str) -> tuple[int, Counter[str], list[tuple[Any, ...]]]:
    img = image()
    agree: Counter[str] = Counter()
    wrong: list[tuple[Any, ...]] = []
    n = 0
    for p, m, argv, pf, mf, args, want in (x for doc in recorded(release) for x in grid_judge.points(doc)):
        got = grid_judge.outcome(img, release, pf, mf, args)
        n += 1
        bad = grid_judge.differs(got, want)
        if bad:
            wrong.append((p, m, argv, bad, {k: got.get(k) for k in ("error", "message", *grid_judge.FIELDS)},
                          {k: want.get(k) for k in ("error", "message", *grid_judge.FIELDS)}))
        else:
            agree["backends/page/kv/dsa/error"] += 1
        if "error" not in want and "error" not in got:
            agree["ok points"] += 1
            for f in grid.MEMORY:
                agree[f] += got.get(f) == want.get(f)
        if "error" in want and got.get("where") == want.get("where"):
            agree["error where"] += 1
    return n, agree, wrong


@pytest.mark.parametrize("release", RELEASES)
def test_grid_agrees(release: str) -> None:
    n, agree, wrong = replay(release)
    assert n == sum(len(d["rows"]) for d in recorded(release)) > 0, "every recorded point is replayed"
    print(f"\nSGLang {release}: {n} points; " + ", ".join(f"{k} {v}" for k, v in sorted(agree.items())))
    assert not wrong, f"{len(wrong)} of {n} points differ, e.g. {wrong[:3]}"
    ok = agree["ok points"]
    for f in grid.MEMORY:
        assert agree[f] == ok, f"{f}: kb agrees at {agree[f]} of {ok} resolved points"


@pytest.mark.parametrize("release", RELEASES)
def test_every_platform_is_recorded_once(release: str) -> None:
    docs = recorded(release)
    plats = [p for d in docs for p in d["platforms"]]
    assert sorted(plats) == sorted(grid.PLATFORMS), f"SGLang {release}: recorded platforms {plats}"
    assert all(d["sglang"] == release and not d["failures"] for d in docs)


def test_releases_and_by() -> None:
    img = image()
    assert sr.releases(img) == ["0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]
    plat = grid_judge.platform(of("0.5.23", "sm100")["platforms"]["sm100"])
    facts = model_facts(of("0.5.23", "sm100")["models"]["mla"])
    got = sr.resolve(img, "0.5.23", plat, facts, {"kv_cache_dtype": "auto", "tp_size": 1})
    assert (got["prefill"], got["decode"], got["page_size"]) == ("trtllm_mla", "trtllm_mla", 64)
    assert got["by"]["attention_backend"].startswith("sglang-0.5.23-cuda#")
    assert "_deepseek_family_overrides" in got["by"]["attention_backend"]
    assert "_mla_backend_page_constraints" in got["by"]["page_size"]


def test_error_names_claim_and_where() -> None:
    img = image()
    plat = grid_judge.platform(of("0.5.23", "sm80")["platforms"]["sm80"])
    facts = model_facts(of("0.5.23", "sm80")["models"]["dense"])
    got = sr.resolve(img, "0.5.23", plat, facts, {"attention_backend": "trtllm_mha"})
    assert got == {
        "error": "ValueError",
        "message": "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), or SM120 GPUs. Please "
                   "use a different prefill backend.",
        "where": "srt/arg_groups/attention_hook.py:203:handle_attention_backend_compatibility",
        "claim": "sglang-trtllm-mha-prefill-arch"}


def test_unknown_release_is_usage_error() -> None:
    from kbtool.errors import UsageError

    with pytest.raises(UsageError, match=r"0\.5\.17, 0\.5\.18, 0\.5\.19, 0\.5\.20, 0\.5\.21, 0\.5\.22, 0\.5\.23 only"):
        sr.resolve(image(), "0.4.0", {}, {}, {})


def test_every_claim_message_is_in_its_grid() -> None:
    """Each SGLang claim's message (templates as wildcards) is an error the grid recorded for every release in
    its scope, unless the claim is in NOT_IN_GRID; a NOT_IN_GRID entry the grid does reach is stale."""
    img = image()
    claims = img.engine_data("sglang")["claims"]
    messages = {r: {o["message"] for d in recorded(r) for o in d["outcomes"] if "error" in o} for r in RELEASES}
    missing, stale = [], []
    for cid, (_w, _r, message, where, _scope) in sorted(claims.items()):
        pat = grid_judge.message_pattern(message)
        for release in where:
            seen = any(pat.fullmatch(m) for m in messages[release])
            exempt = cid in NOT_IN_GRID or f"{cid}@{release}" in NOT_IN_GRID
            if not seen and not exempt:
                missing.append((cid, release))
            if seen and exempt:
                stale.append((cid, release))
    assert not missing, f"claims whose message the grid never shows: {missing}"
    assert not stale, f"NOT_IN_GRID entries the grid does reach: {stale}"
    named = {e.split("@")[0] for e in NOT_IN_GRID}
    assert named <= set(claims), f"NOT_IN_GRID names unknown claims: {sorted(named - set(claims))}"


def test_0_5_19_nemotron_h_and_trtllm_mha_prefill() -> None:
    """0.5.19's own changes against 0.5.18 (model_overrides/nemotron_h.py:97-121, attention_hook.py:132-171): Nemotron-H
    on SM100 defaults to trtllm_mha with pages of 64 (0.5.18: flashinfer, pages of 1), and trtllm_mha prefill on SM90
    resolves where 0.5.18 refused it."""
    img = image()
    sm100 = grid_judge.platform(of("0.5.19", "sm100")["platforms"]["sm100"])
    nemotron = model_facts(of("0.5.19", "sm100")["models"]["mamba"])
    args = {"kv_cache_dtype": "auto", "tp_size": 1}
    old, new = (sr.resolve(img, r, sm100, nemotron, args) for r in ("0.5.18", "0.5.19"))
    assert (old["decode"], old["page_size"]) == ("flashinfer", 1)
    assert (new["decode"], new["page_size"]) == ("trtllm_mha", 64)
    assert "_nemotron_h_overrides" in new["by"]["attention_backend"]
    sm90 = grid_judge.platform(of("0.5.19", "sm90")["platforms"]["sm90"])
    dense = model_facts(of("0.5.19", "sm90")["models"]["dense"])
    trt = {"attention_backend": "trtllm_mha", "kv_cache_dtype": "auto", "tp_size": 1}
    assert sr.resolve(img, "0.5.18", sm90, dense, trt)["claim"] == "sglang-trtllm-mha-prefill-sm100"
    assert sr.resolve(img, "0.5.19", sm90, dense, trt)["prefill"] == "trtllm_mha"


def test_0_5_20_dsa_memory_tiers_and_qwen3_vl() -> None:
    """0.5.20's own changes against 0.5.19: DSA on ROCm defaults to triton (overrides.py:766-770; 0.5.19: tilelang),
    a 24 GiB GPU chunks prefill by 4096 (memory_hook.py:100-116, 0.5.23's tiers; 0.5.19: 2048), and Qwen3-VL on an
    80 GiB Hopper decodes with flashinfer (model_overrides/qwen3_vl.py:88-141; 0.5.19: fa3) and reserves the 1 GiB
    cuda_ipc feature pool instead of the 100 MiB embedding cache (kv_cache_configurator.py:142-160)."""
    from kbtool.solve.engines.sglang import pool as sp
    from kbtool.solve.engines.sglang.facts import model_facts_from_record

    img = image()
    args = {"kv_cache_dtype": "auto", "tp_size": 1}
    mi300x = grid_judge.platform(of("0.5.20", "mi300x")["platforms"]["mi300x"])
    dsa = model_facts(of("0.5.20", "mi300x")["models"]["dsa"])
    old, new = (sr.resolve(img, r, mi300x, dsa, args) for r in ("0.5.19", "0.5.20"))
    assert (old["dsa_prefill_backend"], old["dsa_decode_backend"]) == ("tilelang", "tilelang")
    assert (new["dsa_prefill_backend"], new["dsa_decode_backend"]) == ("triton", "triton")
    sm89 = dict(grid_judge.platform(of("0.5.20", "sm89")["platforms"]["sm89"]), gpu_mem_mib=24 * 1024)
    dense = model_facts(of("0.5.20", "sm89")["models"]["dense"])
    assert [sr.resolve(img, r, sm89, dense, args)["chunked_prefill_size"] for r in ("0.5.19", "0.5.20")] == [2048, 4096]
    h100 = grid_judge.platform(of("0.5.20", "sm90")["platforms"]["sm90"])
    model = img.model("qwen3-vl-8b")
    vl = model_facts_from_record(model)
    assert [sr.resolve(img, r, h100, vl, args)["decode"] for r in ("0.5.19", "0.5.20")] == ["fa3", "flashinfer"]
    given = dict(args, decode_attention_backend="triton")
    assert sr.resolve(img, "0.5.20", h100, vl, given)["decode"] == "triton"
    mib = h100["gpu_mem_mib"]
    assert sp.multimodal_reserve_gib(model, "0.5.19", cc=9.0, gpu_mib=mib) == 100 / 1024
    assert sp.multimodal_reserve_gib(model, "0.5.20", cc=9.0, gpu_mib=mib) == 1.0
    assert sp.multimodal_reserve_gib(model, "0.5.20", cc=9.0, gpu_mib=mib, max_running_requests=400) == 3.0
    assert sp.multimodal_reserve_gib(model, "0.5.20", cc=8.0, gpu_mib=mib) == 100 / 1024


def test_exaone_picks_its_backend_from_0_5_22_and_checks_every_spelling() -> None:
    """EXAONE 4 with a sliding-window pattern: up to 0.5.21 SGLang checks fa3 / triton / trtllm_mha before any default
    is picked, so a line without --attention-backend is refused (the sglang-pool recordings of 0.5.21 show it);
    0.5.22 and 0.5.23 first pick one (model_overrides/exaone.py: trtllm_mha on SM100, fa3 on CUDA from SM80) and
    check the ExaoneMoeForCausalLM spelling too (model_hook.py:668-681 in 0.5.23)."""
    from kbtool.solve.engines.sglang.facts import model_facts_from_record

    img = image()
    exaone = model_facts_from_record(img.model("exaone-4.0-32b"))
    assert exaone["architecture"] == "Exaone4ForCausalLM" and exaone["sliding_window"] > 0
    args = {"kv_cache_dtype": "auto", "tp_size": 1}
    sm80 = grid_judge.platform(of("0.5.23", "sm80")["platforms"]["sm80"])
    sm100 = grid_judge.platform(of("0.5.23", "sm100")["platforms"]["sm100"])
    assert sr.resolve(img, "0.5.21", sm80, exaone, args)["claim"] == "sglang-exaone4-backends"
    for release in ("0.5.22", "0.5.23"):
        assert sr.resolve(img, release, sm80, exaone, args)["prefill"] == "fa3", release
        assert sr.resolve(img, release, sm100, exaone, args)["prefill"] == "trtllm_mha", release
        moe = {**exaone, "architecture": "ExaoneMoeForCausalLM"}
        named = sr.resolve(img, release, sm80, moe, {**args, "attention_backend": "flashinfer"})
        assert named["claim"] == "sglang-exaone4-backends", release
