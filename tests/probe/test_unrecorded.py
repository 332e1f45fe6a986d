"""Evidence of an engine release the KB has no resolution records for (kbtool/probe/unrecorded.py, issue 46):
`kb probe apply` names the missing record and how to add it, exits 1 and writes nothing from that evidence
(it used to abort half-way, after the claims were written, when the sglang-pool judge asked kb's resolver for
a release it does not record)."""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

import pytest
import yaml

from kbtool.kb import load_kb
from kbtool.model import Evidence
from kbtool.probe import commands
from kbtool.probe import evidence as ev_io
from kbtool.probe.rejudge import probes_by_id
from kbtool.probe.unrecorded import engine_of, unrecorded
from kbtool.solve.image import Image
from kbtool.solve.imagebuild import image_of
from tests.util import RECORDS

SGLANG = RECORDS / "evidence" / "2026-12-06-no-gpu-sglang-0-5-18-sglang-resolve.yaml"
VLLM = RECORDS / "evidence" / "2026-12-08-no-gpu-vllm-0-34-0-vllm-engine-config.yaml"
GPU_RUN = RECORDS / "evidence" / "2026-12-02-nvidia-h200-sxm-sglang-boot.yaml"


@cache
def image() -> Image:
    return image_of(load_kb(RECORDS)[0])


def relabel(path: Path, lib: str, old: str, new: str) -> dict[str, object]:
    """An evidence record as if the run had been of release `new` (its id and library version moved)."""
    data = yaml.safe_load(path.read_text())
    data["id"] = data["id"].replace(old.replace(".", "-"), new.replace(".", "-"))
    data["environment"]["libraries"][lib] = new
    return data


def test_a_recorded_release_lacks_nothing() -> None:
    evs = [ev_io.load(SGLANG), ev_io.load(VLLM)]
    assert [engine_of(e, probes_by_id()) for e in evs] == [("sglang", "0.5.18"), ("vllm", "0.34.0")]
    assert unrecorded(image(), evs, probes_by_id()) == []  # vLLM 0.34.0: no priority record, but its own grid


def test_an_unrecorded_sglang_release_names_the_record_and_the_fix() -> None:
    ev = Evidence.model_validate(relabel(SGLANG, "sglang", "0.5.18", "0.5.24"))
    [gap] = unrecorded(image(), [ev], probes_by_id())
    assert (gap.evidence, gap.library, gap.release) == (ev.id, "sglang", "0.5.24")
    assert "records/engine-priorities/sglang-0.5.24-cuda.yaml" in gap.missing and "0.5.18" in gap.missing
    assert gap.fix.startswith("copy sglang-0.5.23-cuda.yaml")  # the newest recorded release before it
    older = Evidence.model_validate(relabel(SGLANG, "sglang", "0.5.18", "0.5.9"))
    assert unrecorded(image(), [older], probes_by_id())[0].fix.startswith("copy sglang-0.5.17-cuda.yaml")


def test_an_unrecorded_vllm_release_without_a_grid_is_named() -> None:
    ev = Evidence.model_validate(relabel(VLLM, "vllm", "0.34.0", "0.99.0"))
    [gap] = unrecorded(image(), [ev], probes_by_id())
    assert "vllm-0.99.0-cuda-priorities.yaml" in gap.missing
    assert "kb probe sweep --lib vllm --releases 0.99.0" in gap.fix


def test_a_gpu_probe_that_lists_the_engine_is_not_an_engine_run() -> None:
    """A boot probe names SGLang among its libraries, but its judge reads the boots, not kb's resolution."""
    data = yaml.safe_load(GPU_RUN.read_text())
    data["environment"].setdefault("libraries", {})["sglang"] = "0.5.99"
    assert unrecorded(image(), [Evidence.model_validate(data)], probes_by_id()) == []


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A records tree with SGLang's resolution records (0.5.17, 0.5.18, 0.5.23) and one SGLang claim."""
    root = tmp_path / "records"
    for sub in ("engine-priorities", "engine-backends"):
        shutil.copytree(RECORDS / sub, root / sub, ignore=lambda _d, names: [n for n in names if "vllm" in n])
    (root / "claims").mkdir()
    shutil.copy(RECORDS / "claims" / "sglang-trtllm-mla-blackwell.yaml", root / "claims")
    return root


def test_apply_leaves_out_an_unrecorded_release_and_writes_nothing(tree: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kbtool.cli import app

    out = tmp_path / "out"
    out.mkdir()
    data = relabel(SGLANG, "sglang", "0.5.18", "0.5.24")
    (out / f"{data['id']}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}

    left: list[object] = []
    updates, _, written = commands.apply(tree, [out], write=True, left_out=left)
    assert updates == [] and written == [] and [g.release for g in left] == ["0.5.24"]  # type: ignore[attr-defined]

    r = CliRunner().invoke(app, ["probe", "apply", "--kb", str(tree), str(out), "--write"])
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert f"left out {data['id']} (sglang 0.5.24)" in text and "sglang-0.5.24-cuda.yaml" in text
    assert "fix: copy sglang-0.5.23-cuda.yaml" in text
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before  # nothing imported or written
    assert not (tree / "evidence").exists()
