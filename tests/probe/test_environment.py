"""The fingerprint names the GPU from the records (issue 29, facts out of Python): an accelerator by the exact device
names its record lists, else by its name and aliases as whole words; an architecture by `compute_capability`."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from kbtool.kb import KB
from kbtool.model import Accelerator, Architecture
from kbtool.names import match_device, name_tokens
from kbtool.probe.environment import accelerator_id, architecture_id, gpu_slug, identify, installed_version
from kbtool.store.records import load_tree
from tests.util import RECORDS


@cache
def records() -> tuple[list[Accelerator], list[Architecture]]:
    kb = KB.from_load(load_tree(RECORDS, [RECORDS / "accelerators", RECORDS / "architectures"]))
    return kb.of_kind("accelerator", Accelerator), kb.of_kind("architecture", Architecture)


def accelerators() -> list[Accelerator]:
    return records()[0]


# What the regex table kbtool/probe/environment.py had before issue 29 decided, one driver name per pattern: each
# still maps to the same id.
OLD_TABLE = [
    ("NVIDIA GB300", "nvidia-gb300"),
    ("NVIDIA GB200", "nvidia-gb200"),
    ("NVIDIA B300", "nvidia-b300"),
    ("NVIDIA B200", "nvidia-b200"),
    ("NVIDIA H200", "nvidia-h200-sxm"),
    ("NVIDIA H100 PCIe", "nvidia-h100-pcie"),
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-sxm"),
    ("NVIDIA H100 SXM5 80GB", "nvidia-h100-sxm"),
    ("NVIDIA H20", "nvidia-h20"),
    ("NVIDIA A100-SXM4-80GB", "nvidia-a100-80gb-sxm"),
    ("NVIDIA A100-SXM4-40GB", "nvidia-a100-40gb-sxm"),
    ("NVIDIA A10", "nvidia-a10"),
    ("NVIDIA L40S", "nvidia-l40s"),
    ("NVIDIA L40", "nvidia-l40"),
    ("NVIDIA L4", "nvidia-l4"),
    ("NVIDIA GeForce RTX 5090", "nvidia-rtx-5090"),
    ("NVIDIA GeForce RTX 4090", "nvidia-rtx-4090"),
    ("AMD Instinct MI355X", "amd-mi355x"),
    ("AMD Instinct MI300X", "amd-mi300x"),
    ("AMD Instinct MI300X VF", "amd-mi300x"),  # the old pattern had no word boundary
    ("NVIDIA H100", None),  # no form factor: SXM, PCIe and NVL all have records
    (None, None),
    ("", None),
]
# Where the old table decided otherwise, and why the answer changed
CHANGED = [
    ("NVIDIA H200 NVL", "nvidia-h200-nvl"),  # was None ("H200 NVL" -> ""); the record exists now
    ("NVIDIA A100 80GB PCIe", "nvidia-a100-80gb-pcie"),  # was the SXM part (A100 .* 80GB); the PCIe record exists
    ("NVIDIA A100-PCIE-40GB", None),  # was the 40 GB SXM part; no record for the 40 GB PCIe card
    ("Tesla T4", "nvidia-t4"),  # was None; the record exists now
    ("NVIDIA H100 NVL", "nvidia-h100-nvl"),  # was None
    ("NVIDIA A10G", "nvidia-a10g"),  # was None (\bA10\b does not match A10G)
    ("NVIDIA H20-3e", "nvidia-h20-141gb"),  # was the 96 GB H20 (\bH20\b)
    ("NVIDIA GH200 480GB", "nvidia-gh200"),  # was None
    ("NVIDIA GH200 144G HBM3e", None),  # the 144 GB GH200 has no record: HBM3e names another card's memory
]


# Cards recorded for issue 47 (serve lines name them), by the names their drivers report: the A40 under vGPU reports
# a profile suffix (vllm#11230: "NVIDIA A40-48Q"); the two 48 GB "6000" workstation cards must not meet
ISSUE_47 = [
    ("NVIDIA A40", "nvidia-a40"),
    ("NVIDIA A40-48Q", "nvidia-a40"),
    ("NVIDIA RTX A6000", "nvidia-rtx-a6000"),
    ("NVIDIA RTX 6000 Ada Generation", "nvidia-rtx-6000-ada"),
    ("NVIDIA A30", "nvidia-a30"),
    ("Quadro RTX 6000", None),  # the Turing card: no record
]


@pytest.mark.parametrize(("name", "acc"), OLD_TABLE + CHANGED + ISSUE_47)
def test_accelerator_id(name: str | None, acc: str | None) -> None:
    assert accelerator_id(name, accelerators()) == acc


def test_every_device_name_maps_back_to_its_record_and_to_no_other() -> None:
    owners: dict[tuple[str, ...], set[str]] = {}
    for a in accelerators():
        for d in a.device_names:
            owners.setdefault(name_tokens(d.value), set()).add(a.id)
            assert d.source is not None and d.source < len(a.sources), (a.id, d.value)
            assert accelerator_id(d.value, accelerators()) == a.id, (a.id, d.value)
    assert {n: ids for n, ids in owners.items() if len(ids) > 1} == {}
    assert len(owners) >= 20  # the records carry the device names (the H200's from a kb probe on the card)


def test_every_record_name_maps_back() -> None:
    for a in accelerators():
        assert accelerator_id(a.name, accelerators()) == a.id, a.name


def test_matching_rules() -> None:
    recs = [("x-h1", ["X H1", "h1"], []), ("x-h1-pcie", ["X H1 PCIe", "h1-pcie"], ["X H1 (PCIe card)"]),
            ("x-h1-big", ["X H1 Big", "h1-big"], [])]
    assert match_device("x_H1--pcie", recs) == "x-h1-pcie"  # case, dashes and underscores do not matter
    assert match_device("X H1 (PCIe card)", recs) == "x-h1-pcie"  # a device name, exactly
    assert match_device("X H1", recs) is None  # "H1" is part of two longer names: which H1?
    assert match_device("X H1 Big", recs) == "x-h1-big"
    assert match_device("X H1 Big PCIe", recs) is None  # "PCIe" is another record's word
    assert match_device("X H10", recs) is None  # whole words only
    tie = [("a", ["card one"], ["X"]), ("b", ["card two"], ["x"])]
    assert match_device("x", tie) is None


def test_architecture_from_the_records() -> None:
    archs = records()[1]
    assert architecture_id("9.0", archs) == "sm90" and architecture_id("10.3", archs) == "sm103"
    assert architecture_id("7.0", archs) is None and architecture_id(None, archs) is None
    ccs = [a.compute_capability for a in archs if a.compute_capability]
    assert len(ccs) == len(set(ccs))
    for a in archs:
        if a.compute_capability:
            assert architecture_id(a.compute_capability, archs) == a.id


def test_identify_reads_the_records(tmp_path: Path) -> None:
    env: dict[str, Any] = {"gpu": "NVIDIA H200", "compute_capability": "9.0"}
    assert identify(dict(env), RECORDS) == {**env, "accelerator": "nvidia-h200-sxm", "architecture": "sm90"}
    empty = identify(dict(env), tmp_path)  # a tree with no accelerator or architecture records names nothing
    assert empty["accelerator"] is None and empty["architecture"] is None
    assert "accelerator" not in identify({"gpu": None}, RECORDS)


def test_slug() -> None:
    assert gpu_slug({"accelerator": "nvidia-h200-sxm", "gpu": "NVIDIA H200"}) == "nvidia-h200-sxm"
    assert gpu_slug({"gpu": "Tesla T4"}) == "tesla-t4"
    assert gpu_slug({"gpu": None}) == "unknown-gpu"


def test_installed_version_needs_the_marker_module() -> None:
    assert installed_version("flash-attn") is None  # not installed here; FA-4's flash_attn/cute would not count
    assert installed_version("pydantic") is not None
