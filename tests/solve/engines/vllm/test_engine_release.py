"""kb's vLLM serving defaults (records/engine-releases, kbtool/solve/engines/vllm/defaults.py) against vLLM's own
config resolution at every point the vllm-engine-config probe recorded (issue 44). No vLLM is needed here.

Every evidence record of the probe names its raw grid (tests/data/vllm/<release>/engine-config.json.gz): per
accelerator and model, what `create_engine_config` resolved for `vllm serve`. kb replays each point from the
accelerator record (memory, device name, compute capability) and the release's engine-release record, and must
agree on every field: 0 mismatches.
"""

from __future__ import annotations

import gzip
import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbtool.kb import load_kb
from kbtool.solve.engines.vllm import defaults as vd
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.image import Image
from kbtool.solve.imagebuild import image_of
from tests.util import RECORDS, ROOT

PROBE = "vllm-engine-config"


@cache
def image(records: Path = RECORDS) -> Image:
    return image_of(load_kb(records)[0])


def grids(records: Path = RECORDS) -> list[dict[str, Any]]:
    """The raw grid of every vllm-engine-config evidence record."""
    out = []
    for path in sorted((records / "evidence").glob(f"*-{PROBE}*.yaml")):
        ev = yaml.safe_load(path.read_text(encoding="utf-8"))
        for case in ev.get("cases") or []:
            raw = (case.get("metrics") or {}).get("raw")
            if case.get("outcome") == "OK" and raw:
                with gzip.open(ROOT / raw, "rt", encoding="utf-8") as fh:
                    out.append({"evidence": ev["id"], **json.load(fh)})
    return out


def expected(row: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """What vLLM resolved at one point, in kb's terms."""
    r = row["resolved"]
    util = r.get("resolved_gpu_memory_utilization")
    runner = r.get("use_v2_model_runner")
    if runner is None:  # no V1/V2 choice in this release: the one runner it has
        runner = not (doc.get("release") or {}).get("v1_model_runner_module", True)
    return {
        "max_num_batched_tokens": r["max_num_batched_tokens"], "max_num_seqs": r["max_num_seqs"],
        "block_size": r["block_size"], "utilization": util if util is not None else r["gpu_memory_utilization"],
        "async_scheduling": bool(r["async_scheduling"]), "chunked_prefill": bool(r["enable_chunked_prefill"]),
        "prefix_caching": bool(r["enable_prefix_caching"]), "state_cache": r.get("mamba_cache_mode") or "none",
        "model_runner": "V2" if runner else "V1", "cudagraph_mode": str(r["cudagraph_mode"]).split(".")[-1],
        "capture_max": r["cudagraph_capture_sizes"]["max"],
        "extensible_kv_cache": bool(r.get("enable_extensible_kv_cache")),
        "kv_auto": {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(r["model_dtype"], r["model_dtype"]),
    }


def replayed(img: Image, release: str, row: dict[str, Any]) -> dict[str, Any]:
    """What kb resolves for the same point, from its records only."""
    memory, name, cc = vd.accelerator_facts(img, row["accelerator"])
    model = img.model(row["model"])
    assert memory and cc, row["accelerator"]
    d = vd.serve_defaults(img, release, memory, name, cc, row["max_model_len"], model.architecture)
    assert d is not None, f"no engine-release record for vLLM {release}"
    hybrid = any(g.type == "linear" for g in model.layers)
    block = d.block_size
    if hybrid and d.hybrid_block_at_config:  # the config widens the block for the state page (kb: vllm_mamba)
        grouped = vllm_pool.groups(model, "bf16", d.block_size)
        assert grouped is not None
        block = grouped.block
    return {
        "max_num_batched_tokens": d.max_num_batched_tokens, "max_num_seqs": d.max_num_seqs,
        "block_size": block, "utilization": d.utilization, "async_scheduling": d.async_scheduling,
        "chunked_prefill": d.chunked_prefill,
        "prefix_caching": d.hybrid_prefix_caching if hybrid else d.prefix_caching,
        "state_cache": d.hybrid_state_cache if hybrid else "none", "model_runner": d.runner(model),
        "cudagraph_mode": d.cudagraph_mode, "capture_max": d.capture_max,
        "extensible_kv_cache": d.extensible_kv_cache,
        "kv_auto": vd.auto_dtype(model.unquantized_dtype or model.weight_dtype, cc)
        if d.kv_cache_dtype_auto == "model" else d.kv_cache_dtype_auto,
    }


def mismatches(img: Image, docs: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """(points compared, one line per field where kb and vLLM differ)."""
    n, bad = 0, []
    for doc in docs:
        for row in doc["rows"]:
            if "error" in row["resolved"]:
                continue
            n += 1
            want, got = expected(row, doc), replayed(img, doc["vllm"], row)
            bad += [f"vLLM {doc['vllm']} {row['accelerator']} {row['model']} {k}: vLLM {want[k]!r}, kb {got[k]!r}"
                    for k in want if want[k] != got[k]]
    return n, bad


def test_every_recorded_point_replays() -> None:
    docs = grids()
    assert {d["vllm"] for d in docs} >= {"0.19.1", "0.20.0", "0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1",
                                         "0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0",
                                         "0.34.0"}, "the probe's grids are missing"
    n, bad = mismatches(image(), docs)
    print(f"{n} points of {len(docs)} releases: {len(bad)} mismatches")
    assert n >= 40 * len(docs)
    assert bad == []


def test_every_recorded_release_has_a_record() -> None:
    img = image()
    recorded = set(vd.rows(img))
    assert {d["vllm"] for d in grids()} <= recorded


def test_the_grid_presented_kbs_accelerator_facts() -> None:
    """The probe showed vLLM the memory, name and cc kb reads today (a record edited since is re-probed)."""
    img = image()
    for doc in grids():
        for acc in doc["accelerators"]:
            assert vd.accelerator_facts(img, acc["id"]) == (acc["memory_bytes"], acc["name"], acc["cc"]), acc["id"]


def test_a_perturbed_record_fails(tmp_path: Path) -> None:
    """The comparison can fail: raise 0.33.0's >= 160 GiB tier in a copy of the records and it finds the B200s."""
    records = tmp_path / "records"
    shutil.copytree(RECORDS, records)
    path = records / "engine-releases" / "vllm-0.33.0.yaml"
    text = path.read_text(encoding="utf-8")
    assert "max_num_batched_tokens: 16384" in text
    path.write_text(text.replace("max_num_batched_tokens: 16384", "max_num_batched_tokens: 12288", 1))
    img = image_of(load_kb(records)[0])
    docs = [d for d in grids() if d["vllm"] == "0.33.0"]
    _, bad = mismatches(img, docs)
    assert bad and all("max_num_batched_tokens" in b or "capture_max" in b for b in bad)
    assert any("nvidia-b200" in b for b in bad)


@pytest.mark.parametrize(("memory_gib", "name", "cc", "want"), [
    (44.4, "NVIDIA L40S", "8.9", (2048, 256)),          # arg_utils.py:2998 (below 70 GiB)
    (79.2, "NVIDIA A100-SXM4-80GB", "8.0", (2048, 256)),  # arg_utils.py:2984-2986 ("a100" not in the name)
    (79.6, "NVIDIA H100 80GB HBM3", "9.0", (8192, 1024)),  # arg_utils.py:2984
    (178.4, "NVIDIA B200", "10.0", (16384, 1024)),       # arg_utils.py:2973 (>= 160 GiB)
    (119.7, "NVIDIA GB10", "12.1", (2048, 256)),         # arg_utils.py:2987 (GB10 stays on the small tier)
])
def test_batch_tiers_of_0_33_0(memory_gib: float, name: str, cc: str, want: tuple[int, int]) -> None:
    d = vd.serve_defaults(image(), "0.33.0", int(memory_gib * vd.GIB), name, cc, 32768)
    assert d is not None and (d.max_num_batched_tokens, d.max_num_seqs) == want


def test_max_model_len_caps_the_batch() -> None:
    """arg_utils.py:3221 (0.33.0): tokens <= max_num_seqs x max_model_len; then max_num_seqs <= tokens."""
    d = vd.serve_defaults(image(), "0.33.0", 80 << 30, "NVIDIA H100", "9.0", max_model_len=4)
    assert d is not None and (d.max_num_batched_tokens, d.max_num_seqs) == (4096, 1024)


def _recorded(kind: str) -> list[str]:
    """Releases with a raw grid of the probe (tests/data/vllm/<release>/<kind>.json.gz)."""
    return sorted(p.parent.name for p in (ROOT / "tests" / "data" / "vllm").glob(f"*/{kind}.json.gz"))


@pytest.mark.parametrize("release", _recorded("engine-config"))
def test_a_query_for_a_recorded_release_answers_with_its_own_defaults(release: str) -> None:
    """`kb query --engine vllm --vllm X` takes X's own engine-release record and X's own planning line where both
    are recorded: the `assumed:` line names X with no "nearest recorded", the defaults are X's (no neighbour's
    record: `borrowed` false), and the engine report's planning is X's. A neighbour's record or line used for X
    fails here, whether or not the two releases resolve alike."""
    from kbtool.solve.engines.vllm import planning as vllm_planning
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    img = image()
    memory, name, cc = vd.accelerator_facts(img, "nvidia-h100-sxm")
    assert memory and cc
    d = vd.serve_defaults(img, release, memory, name, cc, 32768)
    assert d is not None and d.release == release and not d.borrowed
    a = solve(img, build_query(engine="vllm", vllm=release, gpu="h100", model="qwen3-8b", ctx="32k"))
    said = str(a.assumed.get("max_num_batched_tokens"))
    assert f"(vLLM {release}, on" in said and "nearest recorded" not in said, said
    if release in _recorded("kv-planning"):
        assert vllm_planning.planning(release).release == release
        assert a.memory is not None and a.memory.engine_report["planning"] == release
