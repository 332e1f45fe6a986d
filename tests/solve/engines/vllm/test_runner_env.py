"""VLLM_USE_V2_MODEL_RUNNER in a pasted line (vllm/config/vllm.py use_v2_model_runner reads it before the model's
default: :551 in 0.26.0; envs.py:1922-1924 reads it as bool(int(value))): it picks the runner kb sizes with, where
the release still has both runners."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool import query_cli
from kbtool.solve.engines.vllm.args import parse, runner_env
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve


@pytest.mark.parametrize(("line", "runner"), [
    ("VLLM_USE_V2_MODEL_RUNNER=0 vllm serve m", "V1"),
    ("VLLM_USE_V2_MODEL_RUNNER=1 vllm serve m", "V2"),
    ("CUDA_VISIBLE_DEVICES=0 env VLLM_USE_V2_MODEL_RUNNER=0 vllm serve m", "V1"),
    ("vllm serve m", None),
    ("VLLM_USE_V2_MODEL_RUNNER=false vllm serve m", None),  # vLLM's int() refuses it; kb keeps the default
    ("vllm serve m VLLM_USE_V2_MODEL_RUNNER=0", None),  # after the command it is an argument, not the environment
])
def test_the_variable_is_read_before_the_command_only(line: str, runner: str | None) -> None:
    assert runner_env(line.split()) == runner
    assert parse(line).model_runner == runner


@pytest.fixture(scope="module")
def img() -> Any:
    return query_cli.image()


def reserve(img: Any, release: str, env: str = "") -> tuple[Any, Any]:
    a = solve(img, build_query(gpu="h100", vllm=release, vllm_args=f"{env} vllm serve qwen3-vl-4b --max-model-len "
                                                                   "32768 --enforce-eager".strip()))
    return a.memory.reserve_bytes, a


def test_the_v1_runner_makes_the_encoder_pass_the_v2_runner_skips(img: Any) -> None:
    """0.26.0 runs Qwen3-VL on V2 by default (no start-up encoder pass); forced to V1 its profile run encodes one
    16,384-token image first (kb: 1.81 GB at the tower's MLP), which the reserve then holds."""
    v2, _ = reserve(img, "0.26.0")
    v1, a = reserve(img, "0.26.0", "VLLM_USE_V2_MODEL_RUNNER=0")
    assert v1 - v2 > 1e9
    assert a.assumed["model runner"].startswith("V1 (VLLM_USE_V2_MODEL_RUNNER=0")
    assert "encoder pass 1 image item x 16,384 tokens" in a.memory.formula


def test_a_release_with_only_the_v2_runner_ignores_it(img: Any) -> None:
    plain, _ = reserve(img, "0.34.0")
    forced, a = reserve(img, "0.34.0", "VLLM_USE_V2_MODEL_RUNNER=0")
    assert forced == plain and "model runner" not in a.assumed
    assert any("has only the V2 model runner" in n for n in a.memory.notes)
