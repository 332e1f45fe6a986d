"""The sglang-boot probe's parsing of SGLang's start-up lines, its measured rows, its cases and its clean-up.

The fixture logs (tests/probe/fixtures/sglang_boot/*.log) are written in SGLang 0.5.17's formats, each line from
the f-string that prints it (file:line in the 0.5.17 wheel, sglang/srt/...):
  KV Cache is allocated (MHA)   mem_cache/memory_pool.py:1669-1673
  KV Cache is allocated (MLA)   mem_cache/memory_pool.py:1677-1680
  "Full"/"SWA" pool labels      mem_cache/swa_memory_pool.py:68,75
  Memory pool end               mem_cache/kv_cache_configurator.py:257-260
  max_total_num_tokens=...      managers/scheduler.py:1067-1077
  Load weight begin / end       model_executor/model_runner.py:1011-1013 / :1099-1106 (quant string:
                                configs/model_config.py:1279-1297)
  Capture ... CUDA graph        model_executor/model_runner_components/cuda_graph_setup.py:361-377 (prefill),
                                :429-456 (decode)
  Use sliding window memory pool  model_executor/pool_configurator.py:473-476
  Init torch distributed ends   distributed/bootstrap.py:126-129
  log prefix "[%(asctime)s TP0] " utils/common.py:2173
"""

from __future__ import annotations

import json
import tarfile
import time
from pathlib import Path

import pytest

from kbtool.probe.judges import sglang_boot as sglang_boot_judge
from tests.util import ROOT, load_module

FIX = Path(__file__).parent / "fixtures" / "sglang_boot"
BOOT = ROOT / "probes" / "sglang_boot"


boot_case = load_module("_kb_sglang_boot_case", BOOT / "boot_case.py")
probe = load_module("_kb_probe_sglang_boot", ROOT / "probes" / "sglang_boot.py")


def parse(name: str) -> dict:
    return boot_case.parse_logs((FIX / name).read_text(encoding="utf-8").splitlines())


def test_mha_pool_weights_and_cuda_graphs() -> None:
    r = parse("llama-graphs.log")
    assert r["kv_tokens"] == 851234 and r["kv_layout"] == "MHA" and r["kv_dtype"] == "torch.bfloat16"
    assert r["kv_gb"] == pytest.approx(103.92)
    assert r["kv_pools"] == [{"label": None, "dtype": "torch.bfloat16", "tokens": 851234, "k_gb": 51.96,
                              "v_gb": 51.96}]
    assert (r["load_begin_avail_gb"], r["weights_gb"], r["load_end_avail_gb"]) == (138.12, 15.07, 123.05)
    assert r["model_class"] == "LlamaForCausalLM" and r["quantization_log"] is None
    assert r["pool_end_avail_gb"] == 17.85
    assert (r["max_total_num_tokens"], r["chunked_prefill_size"], r["max_prefill_tokens"],
            r["max_running_requests"], r["context_len"], r["available_gpu_mem_gb"]) == (
        851234, 8192, 16384, 4096, 131072, 15.90)
    assert [(g["phase"], g["backend"], g["mem_usage_gb"]) for g in r["cuda_graphs"]] == [
        ("target decode", "full", 1.02), ("target prefill", "breakable", 0.55)]
    assert r["cuda_graphs"][0]["avail_before_gb"] == 17.50 and r["cuda_graphs"][1]["elapsed_s"] == 20.10
    assert r["cuda_graph_gb"] == pytest.approx(1.57)
    assert r["dist_init_gb"] == 0.54
    assert r["log_attention_backend"] == "fa3" and r["log_mem_fraction_static"] == 0.903
    assert r["swa_tokens"] is None and r["post_capture_tokens"] is None
    # the raw lines come back, the long server_args line does not
    assert any("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 851234" in ln for ln in r["verbatim"])
    assert any(ln.endswith("available_gpu_mem=15.90 GB") for ln in r["verbatim"])
    assert not any("server_args=" in ln for ln in r["verbatim"])


def test_mla_pool_and_quantized_weights() -> None:
    r = parse("deepseek-mla-fp8.log")
    assert (r["kv_layout"], r["kv_tokens"], r["kv_gb"]) == ("MLA", 3702912, 52.97)
    assert r["kv_dtype"] == "torch.float8_e4m3fn"
    assert r["quantization_log"] == "quant=fp8, fmt=e4m3" and r["weights_gb"] == 29.79
    assert r["max_total_num_tokens"] == 3702912 and r["context_len"] == 163840
    assert r["cuda_graphs"] == [] and r["cuda_graph_gb"] is None


def test_hybrid_swa_pool_takes_the_full_pool() -> None:
    r = parse("gemma-swa.log")
    assert [p["label"] for p in r["kv_pools"]] == ["Full", "SWA"]
    assert (r["kv_tokens"], r["kv_gb"]) == (301056, pytest.approx(22.96))
    assert (r["swa_full_tokens"], r["swa_tokens"]) == (301056, 240844)
    assert r["chunked_prefill_size"] is None and r["max_running_requests"] == 2048


def test_nothing_parsed_from_unrelated_lines() -> None:
    r = boot_case.parse_logs(["[2026-12-02 10:00:00 TP0] Scheduler hit an exception: CUDA out of memory."])
    assert r["kv_tokens"] is None and r["max_total_num_tokens"] is None and r["kv_pools"] == []


def test_engine_kwargs() -> None:
    kw = boot_case.engine_kwargs({"id": "x", "model": "llama-3.1-8b", "kv_cache_dtype": "fp8_e4m3",
                                  "mem_fraction_static": 0.8, "disable_cuda_graph": True,
                                  "engine_args": {"page_size": 16}})
    assert kw["model_path"].endswith("probes/vllm_boot/models/llama-3.1-8b")
    assert (kw["load_format"], kw["skip_tokenizer_init"], kw["log_level"]) == ("dummy", True, "info")
    assert (kw["kv_cache_dtype"], kw["mem_fraction_static"], kw["disable_cuda_graph"], kw["page_size"]) == (
        "fp8_e4m3", 0.8, True, 16)
    assert "attention_backend" not in kw and "max_total_tokens" not in kw


def test_cases_are_bootable_and_fit_two_calls() -> None:
    cases = json.loads((BOOT / "cases.json").read_text(encoding="utf-8"))
    assert 8 <= len(cases) <= 14
    assert len({c["id"] for c in cases}) == len(cases)
    known = {"id", "model", "kv_cache_dtype", "attention_backend", "mem_fraction_static", "disable_cuda_graph",
             "context_length", "max_total_tokens", "engine_args", "env", "timeout_s", "est_s", "why", "page_size"}
    for c in cases:
        assert set(c) <= known, c["id"]
        assert (ROOT / "probes" / "vllm_boot" / "models" / c["model"] / "config.json").is_file(), c["id"]
        assert c["timeout_s"] - 15 > c["est_s"], c["id"]  # boot_case.py's own deadline is timeout_s - 15
    assert sum(c["est_s"] for c in cases) <= 2 * 470
    assert any(not c.get("disable_cuda_graph") for c in cases) and any(c.get("disable_cuda_graph") for c in cases)
    assert {"fa3", "flashinfer", "triton"} <= {c.get("attention_backend") for c in cases if "deepseek" in c["model"]}


def test_cases_env_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [c["id"] for c in json.loads((BOOT / "cases.json").read_text(encoding="utf-8"))]
    monkeypatch.setenv("KB_BOOT_FROM", "3")
    assert [c["id"] for c in probe.cases()] == ids[2:]
    monkeypatch.setenv("KB_BOOT_ONLY", f"{ids[5]},{ids[3]}")
    got = probe.cases()
    assert [c["id"] for c in got] == [ids[5], ids[3]] and all("why" not in c and "est_s" not in c for c in got)


def test_measured_rows() -> None:
    m = {"max_total_num_tokens": 851234, "kv_tokens": 851234, "release": "0.5.17", "attention_backend": "fa3",
         "mem_fraction_static": 0.903, "page_size": 1, "weights_gb": 15.07, "kv_gb": 103.92}
    obs = [
        {"params": {"id": "a", "model": "llama-3.1-8b"}, "outcome": "OK", "metrics": m},
        {"params": {"id": "b", "model": "llama-3.1-8b", "mem_fraction_static": 0.8}, "outcome": "OK",
         "metrics": {**m, "mem_fraction_static": 0.8, "max_total_num_tokens": 700000}},
        {"params": {"id": "c", "model": "llama-3.1-8b"}, "outcome": "ERROR", "metrics": m},
        {"params": {"id": "d", "model": "no-such-model"}, "outcome": "OK", "metrics": m},
    ]
    rows = sglang_boot_judge.measured(obs)
    assert [(r["case"], r["quantity"], r["value"]) for r in rows] == [
        ("a", "max_total_num_tokens", 851234), ("a", "mem_fraction_static", 0.903),
        ("b", "max_total_num_tokens", 700000)]
    assert rows[0]["sglang"] == "0.5.17" and rows[0]["architecture"] and rows[0]["layers"] == 32
    assert rows[0]["mem_fraction_static_given"] is False and rows[2]["mem_fraction_static_given"] is True
    assert rows[0]["metrics"]["weights_gb"] == 15.07
    assert probe.summarize(obs, {})["measured"] == rows


def test_bundle_unpacked_from_stash_pieces(tmp_path: Path) -> None:
    src = tmp_path / "src" / "sglang"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("__version__ = '0.5.17'\n")
    tar = tmp_path / "b.tar.xz"
    with tarfile.open(tar, "w:xz") as t:
        t.add(src, arcname="sglang")
    data = tar.read_bytes()
    stash = tmp_path / "stash"
    stash.mkdir()
    (stash / "sglang-boot-0.5.17-part-aa").write_bytes(data[:100])
    (stash / "sglang-boot-0.5.17-part-ab").write_bytes(data[100:])
    site = tmp_path / "sgl-site"
    assert probe.ensure_bundle(site, stash) is None
    assert (site / "sglang" / "__init__.py").read_text() == "__version__ = '0.5.17'\n"
    assert probe.ensure_bundle(tmp_path / "other", tmp_path / "empty") is not None


FAKE_SGLANG = '''
import os, subprocess, sys, time
__version__ = "0.0.fake"
class Engine:
    def __init__(self, **kw):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open(os.environ["FAKE_CHILD_PID"], "w").write(str(child.pid))
        print("[2026-12-02 10:00:11 TP0] Load weight begin. avail mem=138.12 GB", file=sys.stderr, flush=True)
        time.sleep(600)
'''


def test_hung_boot_is_killed_with_its_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A boot that hangs ends at boot_case.py's deadline (timeout_s - 15) as TIMEOUT, with what the log held, and
    the process it started (SGLang's scheduler, here a sleeper) is gone afterwards."""
    site = tmp_path / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text(FAKE_SGLANG)
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("KB_SGL_SITE", str(site))
    monkeypatch.setenv("FAKE_CHILD_PID", str(pid_file))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-smi: no wait for a free GPU
    t0 = time.time()
    monkeypatch.setenv("KB_SGL_DONE", str(tmp_path / "done.txt"))
    res = probe.run({"id": "hang", "model": "llama-3.1-8b", "timeout_s": 20})
    assert time.time() - t0 < 12  # boot_case.py's own deadline (5 s), not run()'s (15 s), unless the host crawls
    assert res["outcome"] == "TIMEOUT", res
    assert res["metrics"]["load_begin_avail_gb"] == 138.12
    assert res["metrics"]["release"] == "0.0.fake"
    assert (tmp_path / "done.txt").read_text() == "hang\n"
    child = int(pid_file.read_text())
    for _ in range(20):
        stat = Path(f"/proc/{child}/stat")
        if not stat.exists() or stat.read_text().split(")")[-1].split()[0] in ("Z", "X"):  # gone, or a zombie
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the boot's child {child} outlived the case")


def test_record_from_the_log_alone(tmp_path: Path) -> None:
    """A boot killed before it wrote its record still yields what its log held, classified."""
    log = tmp_path / "x.log"
    oom = "[2026-12-02 10:05:19 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    log.write_text((FIX / "deepseek-mla-fp8.log").read_text(encoding="utf-8") + oom)
    rec = probe.from_log_only(log, {"id": "x"}, -9, "")
    assert rec["outcome"] == "OOM" and rec["summary"]["kv_tokens"] == 3702912
    assert rec["last_log_lines"][-1].endswith("Tried to allocate 2.00 GiB")
    assert probe.from_log_only(log, {"id": "x"}, -9, "killed after 135 s; ")["outcome"] == "TIMEOUT"


def test_resume_skips_boots_done_on_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [c["id"] for c in json.loads((BOOT / "cases.json").read_text(encoding="utf-8"))]
    done = tmp_path / "done.txt"
    done.write_text(f"{ids[0]}\n{ids[2]}\n")
    monkeypatch.setenv("KB_SGL_DONE", str(done))
    assert [c["id"] for c in probe.cases()] == ids  # only with KB_BOOT_RESUME=1
    monkeypatch.setenv("KB_BOOT_RESUME", "1")
    assert [c["id"] for c in probe.cases()] == [ids[1], *ids[3:]]
