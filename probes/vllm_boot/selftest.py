#!/usr/bin/env python3
"""Check boot_case.parse_logs on log text built from vLLM 0.24.0's own format strings (no GPU, no vLLM).

usage: python3 probes/vllm_boot/selftest.py [SITE]   SITE: an unpacked bundle (default /tmp/vllm-boot-0.24.0/site);
where SITE exists, each format string below is first checked to occur verbatim in its source file.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from boot_case import parse_logs

MEM_REPR = (
    "Memory profiling takes {:.2f} seconds. Total non KV cache memory: {}GiB; torch peak memory increase: "
    "{}GiB; non-torch forward increase memory: {}GiB; weights memory: {}GiB."
)
# (source file, format string as in the source, arguments)
LINES = [
    ("v1/worker/gpu_worker.py", "worker requested memory: %sGiB", ("125.16",)),
    (
        "v1/worker/gpu_worker.py",
        "Initial free memory: %s GiB; Requested memory: %f (util), %s GiB",
        ("138.7", 0.9, "125.16"),
    ),
    (
        "v1/worker/gpu_worker.py",
        "Free memory after profiling: %s GiB (total), %s GiB (within requested)",
        ("121.02", "107.48"),
    ),
    (None, MEM_REPR.replace("{:.2f}", "%.2f").replace("{}", "%s"), (1.73, "17.61", "1.38", "0.95", "15.28")),
    ("v1/worker/gpu_worker.py", "Available KV cache memory: %s GiB", ("107.15",)),
    (
        "v1/worker/gpu_worker.py",
        "CUDA graph pool memory: %s GiB (actual), %s GiB (estimated), difference: %s GiB (%.1f%%).",
        (0.61, 0.45, 0.16, 26.2),
    ),
    ("v1/worker/gpu_model_runner.py", "Model loading took %s GiB memory and %.6f seconds", ("15.28", 3.21)),
    ("v1/worker/gpu_model_runner.py", "Graph capturing finished in %.0f secs, took %.2f GiB", (9.0, 0.61)),
    ("v1/core/kv_cache_utils.py", "Add %d padding layers, may waste at most %.2f%% KV cache memory", (1, 8.33)),
    ("v1/core/kv_cache_utils.py", "GPU KV cache size: %s tokens", (f"{780064:,}",)),
    ("v1/core/kv_cache_utils.py", "Maximum concurrency for %s tokens per request: %.2fx", (f"{32768:,}", 23.81)),
    (
        "platforms/cuda.py",
        "Using %s attention backend out of potential backends: %s.",
        ("FLASH_ATTN", "['FLASH_ATTN', 'TRITON_ATTN', 'FLEX_ATTENTION']"),
    ),
    ("v1/attention/backends/mla/prefill/selector.py", "Using %s MLA prefill backend.", ("FLASH_ATTN",)),
    ("v1/engine/core.py", "init engine (profile, create kv cache, warmup model) took %.2f s", (12.34,)),
    ("v1/worker/gpu_worker.py", "Using V2 Model Runner", ()),
    (
        "v1/worker/gpu_worker.py",
        "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
        "--gpu-memory-utilization=%.4f is equivalent to --gpu-memory-utilization=%.4f without CUDA graph memory "
        "profiling. To maintain the same effective KV cache size as before, increase --gpu-memory-utilization to "
        "%.4f. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
        (0.9, 0.8968, 0.9032),
    ),
    (
        None,
        "Free memory on device (%s/%s GiB) on startup. Desired GPU memory utilization is (%s, %s GiB). Actual "
        "usage is %s GiB for weight, %s GiB for peak activation, %s GiB for non-torch memory, and %s GiB for CUDAGraph "
        "memory. Replace gpu_memory_utilization config with `--kv-cache-memory=%s` (%s GiB) to fit into requested "
        "memory, or `--kv-cache-memory=%s` (%s GiB) to fully utilize gpu memory. Current kv cache memory in use is "
        "%s GiB.",
        (
            "138.7",
            "139.81",
            0.9,
            "125.16",
            "15.28",
            "1.38",
            "0.95",
            "0.61",
            115000000000,
            "107.1",
            130000000000,
            "121.1",
            "107.15",
        ),
    ),
]


def main():
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/vllm-boot-0.24.0/site") / "vllm"
    if site.is_dir():
        for src, fmt, _ in LINES:
            if src:
                text = (site / src).read_text()
                assert fmt in text or fmt.split("%")[0][:45] in text, f"{src}: format string not found: {fmt!r}"
        mem = (site / "utils/mem_utils.py").read_text()
        assert "Memory profiling takes" in mem and "non-torch forward increase memory" in mem
        print(f"format strings found in {site}")
    lines = [f"INFO [x.py:1] {fmt % args}" for _, fmt, args in LINES]
    r = parse_logs(lines)
    expect = {
        "weights_gib": 15.28,
        "activation_peak_gib": 1.38,
        "non_torch_gib": 0.95,
        "non_kv_cache_gib": 17.61,
        "requested_gib": 125.16,
        "initial_free_gib": 138.7,
        "available_kv_gib": 107.15,
        "cudagraph_estimate_gib": 0.45,
        "cudagraph_actual_gib": 0.61,
        "graph_capture_s": 9,
        "kv_cache_tokens": 780064,
        "max_concurrency": 23.81,
        "attention_backend": "FLASH_ATTN",
        "mla_prefill_backend": "FLASH_ATTN",
        "padding_layers": [1],
        "v2_model_runner": True,
        "init_engine_s": 12.34,
    }
    bad = {k: (r.get(k), v) for k, v in expect.items() if r.get(k) != v}
    assert not bad, bad
    assert any("GPU KV cache size: 780,064 tokens" in ln for ln in r["verbatim"])
    assert any("Maximum concurrency for 32,768 tokens per request: 23.81x" in ln for ln in r["verbatim"])
    assert any("Add 1 padding layers" in ln for ln in r["verbatim"])
    assert r["matches"]["cg_equivalent_util"] == [[0.9, 0.8968]], r["matches"].get("cg_equivalent_util")
    fu = r["matches"]["final_usage"][0]
    assert fu[:8] == [138.7, 139.81, 0.9, 125.16, 15.28, 1.38, 0.95, 0.61] and fu[-1] == 107.15, fu
    print("parse_logs: ok,", len(expect), "fields")


if __name__ == "__main__":
    main()
