"""probes/vllm_boot/boot_case.py's summary fields that need no GPU to check (the log parser has its own selftest)."""

from __future__ import annotations

from tests.util import ROOT, load_module

boot_case = load_module("_kb_vllm_boot_case", ROOT / "probes" / "vllm_boot" / "boot_case.py")
probe = load_module("_kb_probe_vllm_boot", ROOT / "probes" / "vllm_boot.py")


def test_memory_held_before_the_first_snapshot() -> None:
    """What the device holds when vLLM takes its first snapshot (total - free of worker.init_snapshot): the part
    0.34.0's extensible cache pays and kb does not model yet; a boot records it for the next estimate."""
    gib = 1 << 30
    assert boot_case.held_before_snapshot({"total_bytes": 80 * gib, "init_free_bytes": 79 * gib - gib // 2}) == 1.5
    assert boot_case.held_before_snapshot({"total_bytes": 80 * gib}) is None  # not read in process: unknown
    assert boot_case.held_before_snapshot({"total_bytes": gib, "init_free_bytes": 2 * gib}) is None


def test_the_evidence_keeps_it() -> None:
    assert "held_before_snapshot_gib" in probe.KEEP


def test_a_case_waits_for_the_gpu_an_earlier_case_still_holds() -> None:
    """A killed case's engine core frees the GPU some seconds later: the next case waits for it (up to its limit),
    and reports what still holds the GPU rather than booting into a half-free device."""
    left = [2, 1, 0]
    naps: list[float] = []
    assert probe.wait_for_gpu(limit_s=30, step_s=3, busy=lambda: left.pop(0), sleep=naps.append) == 0
    assert naps == [3, 3]
    assert probe.wait_for_gpu(limit_s=9, step_s=3, busy=lambda: 1, sleep=naps.append) == 1
    assert len(naps) == 2 + 3


def test_the_cuda_graph_estimate_by_mode_is_read_from_vllms_debug_lines() -> None:
    """vLLM logs its CUDA-graph estimate per mode (gpu_model_runner.py profile_cudagraph_memory): the probe keeps
    graphs, largest size, first capture and per graph, which kb's graph term is fitted to."""
    lines = [
        "INFO 12-07 [gpu_model_runner.py:6611] Profiling CUDA graph memory: PIECEWISE=51 (largest=512), "
        "FULL=35 (largest=256)",
        "DEBUG 12-07 [gpu_model_runner.py:6688] Estimated PIECEWISE CUDA graph memory: 412.50 MiB first-capture "
        "+ (51-1) \u00d7 1.25 MiB per-graph",
        "DEBUG 12-07 [gpu_model_runner.py:6688] Estimated FULL CUDA graph memory: 1,024.00 MiB first-capture "
        "+ (35-1) \u00d7 2.00 MiB per-graph",
        "INFO 12-07 [gpu_model_runner.py:6738] Estimated CUDA graph memory: 1.08 GiB total",
    ]
    got = boot_case.parse_logs(lines)["cudagraph_profile"]
    assert got == {"PIECEWISE": {"graphs": 51, "largest": 512, "first_capture_mib": 412.5, "per_graph_mib": 1.25},
                   "FULL": {"graphs": 35, "largest": 256, "first_capture_mib": 1024, "per_graph_mib": 2}}
    assert boot_case.parse_logs(lines[3:])["cudagraph_profile"] is None
    assert "cudagraph_profile" in probe.KEEP
