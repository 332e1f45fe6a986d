"""kb's vLLM serving defaults (records/engine-releases, kbtool/solve/engines/vllm/defaults.py) against vLLM's own
config resolution at every point the vllm-engine-config probe recorded (issue 44). No vLLM is needed here.

Every evidence record of the probe names its raw grid (tests/data/vllm/<release>/engine-config.json.gz): per
accelerator and model, what `create_engine_config` resolved for `vllm serve`. kb replays each point from the
accelerator record (memory, device name, compute capability) and the release's engine-release record, and must
agree on every field: 0 mismatches.
"""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from kbtool.kb import load_kb
from kbtool.solve.engines.vllm import conformance
from kbtool.solve.engines.vllm import defaults as vd
from kbtool.solve.image import Image
from kbtool.solve.imagebuild import image_of
from tests.util import RECORDS, ROOT

PROBE = "vllm-engine-config"


@cache
def image(records: Path = RECORDS) -> Image:
    return image_of(load_kb(records)[0])


def grids(records: Path = RECORDS) -> list[dict[str, Any]]:
    """The raw grid of every vllm-engine-config evidence record."""
    return conformance.evidence_grids(records, ROOT, PROBE)


def mismatches(img: Image, docs: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """(points compared, one line per field where kb and vLLM differ): kbtool/solve/engines/vllm/conformance.py."""
    return conformance.config_mismatches(img, docs)


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
