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


def test_the_v1_runners_encoder_pass_line_is_read() -> None:
    """vLLM's V1 runner logs the encoder pass it makes before the profile run's text step (gpu_model_runner.py
    profile_run); the boot keeps budget, items and modality. The V2 runner logs none: None, not zeros."""
    lines = ["INFO 12-07 [gpu_model_runner.py:6396] Encoder cache will be initialized with a budget of 16384 tokens, "
             "and profiled with 1 image items of the maximum feature size."]
    got = boot_case.parse_logs(lines)
    assert got["encoder_profile"] == {"budget_tokens": 16384, "items": 1, "modality": "image"}
    assert got["verbatim"] == lines
    assert boot_case.parse_logs(["INFO GPU KV cache size: 1,000 tokens"])["encoder_profile"] is None
    assert "encoder_profile" in probe.KEEP


def test_multimodal_cases_boot_with_the_tokenizer_and_no_processor_cache() -> None:
    """A case whose folder holds a processor config is multimodal: vLLM 0.26.0 needs its tokenizer to build the
    profile run's dummy prompt and, under transformers 5.24, the processor cache off (boot_case.llm_kwargs). Text
    cases keep booting without a tokenizer. Each multimodal folder is listed in SOURCES.md and stays small (a device
    call carries the whole checkout)."""
    import json

    models = ROOT / "probes" / "vllm_boot" / "models"
    cases = json.loads((ROOT / "probes" / "vllm_boot" / "cases.json").read_text(encoding="utf-8"))
    sources = (models / "SOURCES.md").read_text(encoding="utf-8")
    mm = [c for c in cases if (models / c["model"] / "preprocessor_config.json").is_file()]
    assert {c["model"] for c in mm} >= {"qwen3-vl-4b", "gemma-3-4b"}
    for c in cases:
        kw = boot_case.llm_kwargs(c, models / c["model"])
        assert kw["load_format"] == "dummy" and kw["model"].endswith(c["model"])
        if c in mm:
            assert kw["skip_tokenizer_init"] is False and kw["mm_processor_cache_gb"] == 0, c["id"]
            assert (models / c["model"] / "tokenizer_config.json").is_file(), c["id"]
            assert f"| {c['model']} |" in sources, c["model"]
        else:
            assert kw["skip_tokenizer_init"] is True and "mm_processor_cache_gb" not in kw, c["id"]
    # both runners: 0.26.0's V2 (the default for these dense models) makes no encoder pass, V1 does
    runners = {(c["model"], (c.get("env") or {}).get("VLLM_USE_V2_MODEL_RUNNER")) for c in mm}
    assert {("qwen3-vl-4b", None), ("qwen3-vl-4b", "0"), ("gemma-3-4b", None), ("gemma-3-4b", "0")} <= runners
    size = sum(f.stat().st_size for m in {c["model"] for c in mm} for f in (models / m).iterdir())
    assert size < 8 * 2**20, size
