"""Conformance: kb's SGLang engine against SGLang's own launch defaults and KV pool planning, at every point the
sglang-pool probe recorded (tests/data/sglang/<release>/pool-*.json.gz: SGLang's ServerArgs and KVCacheConfigurator
run on a CPU with each recorded accelerator presented, probes/_sglang_pool.py). No SGLang is needed.

Per recorded row (accelerator x model x launch line) kb's resolution (kbtool/solve/engines/sglang/resolve.py) must
give SGLang's prefill / decode backends, page size, mem_fraction_static, chunked_prefill_size, decode CUDA-graph
max batch and KV dtype; kb's pool cell (pool.py cell_of) SGLang's bytes per token; and per available-memory point
kb's planner (plan.py) SGLang's max_total_num_tokens, max_running_requests and Mamba state slots, or its start-up
error with the exact text. Known gaps are listed in KNOWN with the reason; an entry that no longer differs is stale
and fails.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from typing import Any

import pytest

from kbtool.kb import load_kb
from kbtool.probe.judges import sglang_pool as pool_judge
from kbtool.solve.engines.sglang.plan import Cell, plan
from kbtool.solve.image import Image
from kbtool.solve.imagebuild import image_of
from probes import sglang_pool as probe
from tests.util import RECORDS, ROOT

DATA = ROOT / "tests" / "data" / "sglang"
RELEASES = ("0.5.23", "0.5.22", "0.5.21", "0.5.20", "0.5.19", "0.5.18", "0.5.17")
# (field, model) pairs kb does not reproduce yet, each with the reason; the rows are still replayed for everything
# else, and the pool points are planned with SGLang's value for the field (so the planner is still held to SGLang)
_VLM = ("SGLang lowers mem_fraction_static for a multimodal checkpoint by its vision tower's size (0.5.17 "
        "server_args.py:9083 adjust_mem_fraction_for_vlm, 0.5.23 arg_groups/memory_hook.py:417); kb's model records "
        "do not hold the vision tower yet")
_LLAMA2 = ("SGLang caps the prefill CUDA-graph max batch at 4096 when the model path contains 'llama-2' "
           "(every recorded release; 0.5.19 arg_groups/memory_hook.py:212-217, 0.5.23 memory_hook.py:258-262), so it "
           "reserves fewer capture sizes (0.001 more of the GPU where the chunk is 8192); kb's resolution does not "
           "read the model path")
KNOWN: dict[tuple[str, str], str] = {
    ("mem_fraction_static", "devstral-small-2-24b"): _VLM,
    ("mem_fraction_static", "gemma-4-26b-a4b"): _VLM,
    ("mem_fraction_static", "kimi-k2.5"): _VLM,
    ("mem_fraction_static", "qwen3.5-27b"): _VLM,
    ("mem_fraction_static", "qwen3.5-397b-a17b"): _VLM,
    # multimodal checkpoints first recorded with 0.5.19 (the grid grew with the model records), same reason
    **{("mem_fraction_static", m): _VLM for m in (
        "qwen2.5-vl-7b", "qwen3-vl-235b-a22b", "qwen3-vl-2b", "qwen3-vl-30b-a3b", "qwen3-vl-32b", "qwen3-vl-4b",
        "qwen3-vl-8b", "qwen3.5-122b-a10b", "qwen3.5-35b-a3b", "qwen3.5-9b", "qwen3.6-35b-a3b")},
    # recorded from the pool re-recordings of issue 46 (model record added after the first recordings), same reason
    ("mem_fraction_static", "qwen2.5-vl-3b"): _VLM,
    # recorded from the pool re-recordings of branch h20-regrid (model records added since 2026-12-06; Mistral3 and
    # Qwen3.5/3.6 ForConditionalGeneration checkpoints with a vision_config), same reason
    **{("mem_fraction_static", m): _VLM for m in (
        "mistral-small-3.1-24b", "qwen3.6-27b-nvfp4", "qwen3.6-35b-a3b-nvfp4")},
    **{("mem_fraction_static", m): _LLAMA2 for m in ("llama-2-7b", "llama-2-13b", "llama-2-70b")},
    ("kv", "minimax-m2.5"): "the stored config.json is a trimmed copy without torch_dtype (tests/data/hf-configs/"
                            "minimax-m2.5/SOURCE.yaml complete: false), so SGLang's dtype auto falls back to float16; "
                            "kb's record is bf16, and the bytes per token are the same",
}


@cache
def image() -> Image:
    return image_of(load_kb(RECORDS)[0])


@cache
def recorded(release: str) -> tuple[dict[str, Any], ...]:
    return tuple(probe.recorded(release, DATA))


@cache
def replayed(release: str) -> tuple[Counter[str], list[tuple[Any, ...]]]:
    total: Counter[str] = Counter()
    wrong: list[tuple[Any, ...]] = []
    for doc in recorded(release):
        tally, bad = pool_judge.replay(image(), doc)
        total.update(tally)
        wrong += bad
    return total, wrong


@pytest.mark.parametrize("release", RELEASES)
def test_every_recorded_point_is_sglangs(release: str) -> None:
    assert recorded(release), f"no sglang-pool recording for SGLang {release} under {DATA / release}"
    tally, wrong = replayed(release)
    print(f"\nSGLang {release}: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    unknown = [w for w in wrong if (w[0], w[1][1]) not in KNOWN]
    assert tally["pool points"] > 0 and tally["plans"] > 0 and tally["refusals"] > 0
    assert not unknown, f"{len(unknown)} points differ from SGLang {release}, e.g. " + "; ".join(
        f"{w[0]} at {w[1]}: kb {w[2]!r}, SGLang {w[3]!r}" for w in unknown[:4])


def test_known_gaps_are_not_stale() -> None:
    seen = {(w[0], w[1][1]) for r in RELEASES for w in replayed(r)[1]}
    stale = sorted(set(KNOWN) - seen)
    assert not stale, f"KNOWN entries that agree with SGLang now (remove them): {stale}"


def test_every_model_class_is_covered() -> None:
    """The recordings reach every class of SGLang's pool: full, MLA, DSA, hybrid sliding window, Mamba."""
    kinds: Counter[str] = Counter()
    for release in RELEASES:
        for doc in recorded(release):
            for _a, _m, _v, d, pools in doc["rows"]:
                if not pools:
                    continue
                kind = ("mamba" if d.get("mamba") else "swa" if d.get("is_hybrid_swa") else
                        "mla" if d.get("mla") else "full")
                kinds[kind] += len(pools)
    assert all(kinds[k] for k in ("full", "mla", "swa", "mamba")), kinds


def test_the_planner_can_refuse() -> None:
    """The replay can fail: a planner that answers one token short of SGLang differs at a recorded point."""
    doc = recorded(RELEASES[0])[0]
    acc, model, vi, d, pools = next(r for r in doc["rows"] if r[4] and "max_total_num_tokens" in r[4][-1])
    got = pool_judge.kb_point(image(), RELEASES[0], acc, doc["accelerators"][acc], model, list(doc["variants"][vi]))
    assert got is not None and "error" not in got
    cell: Cell = got["_cell"]
    pre = (doc["accelerators"][acc]["memory_mib"] - doc["context_mib"]) / 1024
    p = plan(Cell(bytes=cell.bytes * 1.01), page_size=int(d["page_size"]), mem_fraction_static=d["mem_fraction_static"],
             pre_gib=pre, available_gib=pre * doc["fractions"][-1], context_len=got["_ctx"])
    assert p.tokens != pools[-1]["max_total_num_tokens"]


def test_a_recording_that_kept_the_resolutions_environment_is_replayed_as_a_launch() -> None:
    """Qwen3-VL on an H100 from 0.5.20: SGLang's resolution turns the embedding cache off (qwen3_vl.py:96-98). The
    probe sizes the pool under the environment the resolution left ("resolution_env": "kept", every recording since
    issue 46's re-recording), with the cuda_ipc feature pool alone, as a launch does; a recording made before the fix
    also reserved the 100 MiB embedding cache. The same row read as such an old recording differs, so the flag is
    what the replay goes by."""
    doc = next(d for d in recorded("0.5.22") if "qwen3-vl-8b" in {r[1] for r in d["rows"]})
    assert doc["resolution_env"] == "kept"
    acc, model, vi, _d, pools = next(r for r in doc["rows"] if r[1] == "qwen3-vl-8b" and r[4] and r[2] == 0)
    argv = list(doc["variants"][vi])
    old = pool_judge.kb_point(image(), "0.5.22", acc, doc["accelerators"][acc], model, argv, env_kept=False)
    kept = pool_judge.kb_point(image(), "0.5.22", acc, doc["accelerators"][acc], model, argv, env_kept=True)
    assert old is not None and kept is not None
    assert old["_reserve"] == (100 + 1024) / 1024 and kept["_reserve"] == 1024 / 1024
    _tally, wrong = pool_judge.replay(image(), {**doc, "rows": [[acc, model, vi, _d, pools]]})
    assert not [w for w in wrong if w[0] == "pool"]  # as recorded: the launch's reserve (mem_fraction_static: KNOWN)
    before = {k: v for k, v in doc.items() if k != "resolution_env"}
    _tally, wrong = pool_judge.replay(image(), {**before, "rows": [[acc, model, vi, _d, pools]]})
    assert any(w[0] == "pool" for w in wrong)  # the same pools read as a recording from before the fix differ
