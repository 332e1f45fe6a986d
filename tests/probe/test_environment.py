from __future__ import annotations

import pytest

from kbtool.probe.environment import accelerator_id, architecture_id, gpu_slug, installed_version


@pytest.mark.parametrize(
    ("name", "acc"),
    [
        ("NVIDIA H200", "nvidia-h200-sxm"),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-sxm"),
        ("NVIDIA H100 PCIe", "nvidia-h100-pcie"),
        ("NVIDIA A100-SXM4-80GB", "nvidia-a100-80gb-sxm"),
        ("NVIDIA A10", "nvidia-a10"),
        ("NVIDIA L40S", "nvidia-l40s"),
        ("NVIDIA L4", "nvidia-l4"),
        ("NVIDIA B200", "nvidia-b200"),
        ("NVIDIA GeForce RTX 4090", "nvidia-rtx-4090"),
        ("Tesla T4", None),
        (None, None),
    ],
)
def test_accelerator_id(name: str | None, acc: str | None) -> None:
    assert accelerator_id(name) == acc


def test_architecture_and_slug() -> None:
    assert architecture_id("9.0") == "sm90" and architecture_id("10.3") == "sm103" and architecture_id("7.0") is None
    assert gpu_slug({"accelerator": "nvidia-h200-sxm", "gpu": "NVIDIA H200"}) == "nvidia-h200-sxm"
    assert gpu_slug({"gpu": "Tesla T4"}) == "tesla-t4"


def test_installed_version_needs_the_marker_module() -> None:
    assert installed_version("flash-attn") is None  # not installed here; FA-4's flash_attn/cute would not count
    assert installed_version("pydantic") is not None
