from __future__ import annotations

import signal

import pytest

from kbtool.probe.outcome import classify_exception, describe_exit, normalize_result


@pytest.mark.parametrize(
    ("type_name", "message", "outcome"),
    [
        ("NotImplementedError", "anything", "UNSUPPORTED"),
        ("ValueError", "Invalid head_dim: 512", "UNSUPPORTED"),
        ("AssertionError", "FP8 is only supported on SM100 (compute capability 10.x) for FA4 CuTe.", "UNSUPPORTED"),
        ("RuntimeError", "No available kernel. Aborting execution.", "UNSUPPORTED"),
        ("RuntimeError", "FlashAttention only supports Ampere GPUs or newer.", "UNSUPPORTED"),
        ("RuntimeError", "CUDA error: an illegal memory access was encountered", "ERROR"),
        ("RuntimeError", "No supported CUDA architectures found for major versions [10, 11, 12].", "UNSUPPORTED"),
        ("OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB", "OOM"),
        ("RuntimeError", "CUDA out of memory. Tried to allocate 2.00 GiB", "OOM"),
        ("MemoryError", "", "OOM"),
        ("KeyError", "'x'", "ERROR"),
        ("TypeError", "f() got an unexpected keyword argument 'backend'", "ERROR"),
    ],
)
def test_classify_exception(type_name: str, message: str, outcome: str) -> None:
    assert classify_exception(type_name, message) == outcome


def test_describe_exit() -> None:
    assert describe_exit(-signal.SIGSEGV, False) == ("ERROR", "worker crashed: SIGSEGV")
    assert describe_exit(-signal.SIGKILL, False)[0] == "OOM"
    assert describe_exit(-signal.SIGKILL, True) == ("ERROR", "worker crashed: SIGKILL")
    assert describe_exit(1, False)[0] == "ERROR"


def test_normalize_result() -> None:
    assert normalize_result(None)["outcome"] == "ERROR"
    assert normalize_result({"outcome": "MAYBE"})["outcome"] == "ERROR"
    # vllm-boot stops vLLM's process at the case's limit and says so: kept, not turned into "unknown outcome"
    late = normalize_result({"outcome": "TIMEOUT", "message": "vLLM did not finish booting within 260 s"})
    assert (late["outcome"], late["message"]) == ("TIMEOUT", "vLLM did not finish booting within 260 s")
    ok = normalize_result({"max_abs_err": 0.1})
    assert ok["outcome"] == "OK" and ok["kernels"] == [] and ok["metrics"] == {}
