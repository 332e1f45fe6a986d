"""Probe: the serving defaults a vLLM release resolves for `vllm serve`, per accelerator and model, without a GPU
(issue 44). The program is probes/vllm_engine_config.py; what it records is data for records/engine-releases,
replayed by tests/solve/engines/vllm/test_engine_release.py, so there are no claims to judge."""

from __future__ import annotations

from typing import Any

from kbtool.probe.spec import ProbeSpec

SPEC = ProbeSpec(
    id="vllm-engine-config",
    version=1,
    order=7,
    title="vLLM serving defaults per accelerator and model, through vLLM's own config resolution (no GPU)",
    claims=[],
    requires={"gpu": False, "packages": ["vllm"]},
    timeout_s=1500,
    untestable="The vLLM engine-config probe needs vLLM installed (KB_VLLM_PYTHON).",
)


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    return []  # no claims: the grid is data for records/engine-releases, replayed by a CI test
