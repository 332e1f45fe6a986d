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
