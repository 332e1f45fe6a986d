#!/usr/bin/env python3
"""Boot SGLang once with dummy weights and record what it reports about memory and its KV pool.

usage: python3 probes/sglang_boot/boot_case.py CASE_JSON OUT_JSON [LOG_FILE]

CASE_JSON is a file holding one case object (or the object itself, inline), as in probes/sglang_boot/cases.json:
  {"id": "...", "model": "llama-3.1-8b" (a folder under probes/vllm_boot/models/, or a path to one),
   "kv_cache_dtype": "auto" | "fp8_e4m3", "attention_backend": "fa3" | "flashinfer" | "triton" (optional),
   "mem_fraction_static": 0.8 (optional), "disable_cuda_graph": true (optional), "context_length": 16384
   (optional), "max_total_tokens": 200000 (optional), "engine_args": {...extra Engine(...) keyword arguments...},
   "env": {...extra environment...}, "timeout_s": 150}
One boot per process: `sglang.Engine(model_path=..., load_format="dummy", skip_tokenizer_init=True,
log_level="info", ...)` in this process (the tokenizer manager), which spawns SGLang's scheduler and detokenizer
processes. fds 1 and 2 go to LOG_FILE (default OUT_JSON with .log), which the children inherit, so every line
SGLang prints, from any of its processes, is in that file; OUT_JSON gets the record and the last line this
script prints on its own stdout is the record's summary as one JSON line.

Clean-up: the script runs as the leader of its own process group (the probe starts it with start_new_session);
SGLang's scheduler and detokenizer SIGKILL themselves when their parent dies (utils/common.py:2955
kill_itself_when_parent_died, called at managers/scheduler.py:4831 and detokenizer_manager.py:520); this script
SIGKILLs itself when its own parent goes (prctl PR_SET_PDEATHSIG, and a thread that watches getppid()), and
after the boot (or at its deadline: the case's timeout_s less 15 s, the record then says TIMEOUT with what the log
held) it kills every process it started before it exits, so the next case finds the GPU free. Before booting it
waits (up to 30 s) for the GPU's used memory, as nvidia-smi reports it, to fall under 2 GiB, and records it.

Where the numbers come from in SGLang 0.5.17 (file:line in the installed wheel, sglang/srt/...):
  mem_cache/memory_pool.py:1670-1672  "{cache_name} is allocated. dtype: {dtype}, #tokens: {n}, K size: {k:.2f} GB,
                                       V size: {v:.2f} GB"  (MHA; cache_name "KV Cache" or "<label> KV Cache")
  mem_cache/memory_pool.py:1678-1679  "{cache_name} is allocated. dtype: {dtype}, #tokens: {n}, KV size: {kv:.2f} GB"
                                       (MLA, one buffer)
  mem_cache/kv_cache_configurator.py:257-260  "Memory pool end. avail mem={:.2f} GB"
  managers/scheduler.py:1068-1076     "max_total_num_tokens={}, chunked_prefill_size={}, max_prefill_tokens={},
                                       max_running_requests={}, context_len={}, available_gpu_mem={:.2f} GB"
  model_executor/model_runner.py:1011-1013  "Load weight begin. avail mem={:.2f} GB"
  model_executor/model_runner.py:1099-1106  "Load weight end. elapsed={:.2f} s, type={cls}, [quant, ]avail
                                       mem={:.2f} GB, mem usage={:.2f} GB."
  model_executor/model_runner_components/cuda_graph_setup.py:361-366 / :429-433  "Capture {role} prefill CUDA
                                       graph begin. ..." / "Capture {role} decode CUDA graph begin. backend=..., ..."
  model_executor/model_runner_components/cuda_graph_setup.py:373-377 / :452-456  "Capture {name} CUDA graph end.
                                       elapsed={:.2f} s, mem usage={:.2f} GB, avail mem={:.2f} GB."
  model_executor/pool_configurator.py:448-451 / :473-476  "Use sliding window memory pool (all SWA).
                                       swa_layer_tokens={}" / "Use sliding window memory pool. full_layer_tokens={},
                                       swa_layer_tokens={}"
  distributed/bootstrap.py:126-129    "Init torch distributed ends. elapsed={:.2f} s, mem usage={:.2f} GB"
  entrypoints/engine.py:237           "server_args=ServerArgs(...)" (the resolved arguments; read in-process instead)
In-process (this process holds the resolved ServerArgs, entrypoints/engine.py:236): engine.server_args
  (attention_backend, prefill/decode_attention_backend, mem_fraction_static, page_size, kv_cache_dtype,
  chunked_prefill_size, cuda_graph_config, context_length, max_total_tokens, max_running_requests) and
  engine._scheduler_init_result.scheduler_infos[0] (what the scheduler sent back at start-up, engine.py:1004);
  the scheduler's internal state (what engine.get_server_info() asks; managers/scheduler.py:4173-4181: memory_usage
  with weight, kvcache, token_capacity, token_capacity_swa, graph) when it answers within 10 s.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = HERE.parent / "vllm_boot" / "models"
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "SGLANG_DISABLE_REQUEST_LOGGING": "1",
    "DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
    "TOKENIZERS_PARALLELISM": "false",
}

NUM = r"(-?[0-9][0-9.,]*)"
# (name, pattern): each pattern is the format string of one SGLang 0.5.17 log line (see the docstring)
PATTERNS = [
    ("kv_mha", r"(?:^|\] )(?:(\w[\w -]*?) )?KV Cache is allocated\. dtype: (\S+), #tokens: " + NUM
     + r", K size: " + NUM + r" GB, V size: " + NUM + r" GB"),
    ("kv_mla", r"(?:^|\] )(?:(\w[\w -]*?) )?KV Cache is allocated\. dtype: (\S+), #tokens: " + NUM
     + r", KV size: " + NUM + r" GB"),
    ("pool_end", r"Memory pool end\. avail mem=" + NUM + r" GB"),
    ("scheduler", r"max_total_num_tokens=" + NUM + r", chunked_prefill_size=(\S+?), max_prefill_tokens=(\S+?), "
     r"max_running_requests=(\S+?), context_len=(\S+?), available_gpu_mem=" + NUM + r" GB"),
    ("load_begin", r"Load weight begin\. avail mem=" + NUM + r" GB"),
    ("load_end", r"Load weight end\. elapsed=" + NUM + r" s, type=(\w+), (?:(.*?), )?avail mem=" + NUM
     + r" GB, mem usage=" + NUM + r" GB\."),
    ("graph_begin", r"Capture (\w+ \w+) (?:CUDA graph|[\w ]+? graph) begin\. backend=([\w.-]+)(.*?), avail mem="
     + NUM + r" GB"),
    ("graph_end", r"Capture (\w+ \w+) (?:CUDA graph|[\w ]+? graph) end\. elapsed=" + NUM + r" s, mem usage=" + NUM
     + r" GB, avail mem=" + NUM + r" GB\."),
    ("swa_pool", r"Use sliding window memory pool\. full_layer_tokens=" + NUM + r", swa_layer_tokens=" + NUM),
    ("swa_only", r"Use sliding window memory pool \(all SWA\)\. swa_layer_tokens=" + NUM),
    ("dist_end", r"Init torch distributed ends\. elapsed=" + NUM + r" s, mem usage=" + NUM + r" GB"),
    ("post_capture", r"Post-capture KV sizing: KV cache allocated\. dtype: (\S+), #tokens: " + NUM
     + r", KV size: " + NUM + r" GB, avail mem=" + NUM + r" GB"),
    ("sa_attention_backend", r"server_args=ServerArgs\(.*?\battention_backend='?([\w-]+)'?"),
    ("sa_mem_fraction_static", r"server_args=ServerArgs\(.*?\bmem_fraction_static=" + NUM),
]
VERBATIM = (
    "KV Cache is allocated",
    "Memory pool end",
    "max_total_num_tokens=",
    "Load weight",
    "CUDA graph begin",
    "CUDA graph end",
    "graph begin",
    "graph end",
    "sliding window memory pool",
    "Init torch distributed ends",
    "Post-capture KV sizing",
    "attention backend",
)


def num(s: str):
    s = s.replace(",", "")
    try:
        return int(s)
    except ValueError:
        try:
            return float(s)
        except ValueError:
            return s


def _value(x: str | None):
    if x is None:
        return None
    if re.fullmatch(NUM, x):
        return num(x)
    return None if x == "None" else x


def parse_logs(lines: list[str]) -> dict:
    """Every match of every pattern, in order, numbers converted, and the summary fields. Pure: tested on log
    text written in SGLang's formats (tests/probe/test_sglang_boot.py)."""
    out: dict = {}
    for line in lines:
        for name, pat in PATTERNS:
            m = re.search(pat, line)
            if m:
                out.setdefault(name, []).append([_value(x) for x in m.groups()])
    res: dict = {"matches": out}

    def last(name, i):
        v = out.get(name)
        return v[-1][i] if v else None

    pools = [{"label": g[0], "dtype": g[1], "tokens": g[2], "k_gb": g[3], "v_gb": g[4]} for g in out.get("kv_mha", [])]
    pools += [{"label": g[0], "dtype": g[1], "tokens": g[2], "kv_gb": g[3]} for g in out.get("kv_mla", [])]
    res["kv_pools"] = pools
    main = [p for p in pools if p["label"] in (None, "Full")] or pools  # hybrid SWA: "Full" and "SWA" pools
    res["kv_tokens"] = main[-1]["tokens"] if main else None
    res["kv_dtype"] = main[-1]["dtype"] if main else None
    res["kv_layout"] = None if not main else ("MLA" if "kv_gb" in main[-1] else "MHA")
    res["kv_gb"] = None if not main else round(main[-1].get("kv_gb") or (main[-1]["k_gb"] + main[-1]["v_gb"]), 4)
    res["pool_end_avail_gb"] = last("pool_end", 0)
    res["max_total_num_tokens"] = last("scheduler", 0)
    res["chunked_prefill_size"] = last("scheduler", 1)
    res["max_prefill_tokens"] = last("scheduler", 2)
    res["max_running_requests"] = last("scheduler", 3)
    res["context_len"] = last("scheduler", 4)
    res["available_gpu_mem_gb"] = last("scheduler", 5)
    res["load_begin_avail_gb"] = last("load_begin", 0)
    res["weights_gb"] = last("load_end", 4)
    res["load_end_avail_gb"] = last("load_end", 3)
    res["model_class"] = last("load_end", 1)
    res["quantization_log"] = last("load_end", 2)
    res["dist_init_gb"] = last("dist_end", 1)
    res["cuda_graphs"] = [{"phase": g[0], "backend": g[1], "avail_before_gb": g[3]} for g in out.get("graph_begin", [])]
    for g in out.get("graph_end", []):
        rec = next((c for c in res["cuda_graphs"] if c["phase"] == g[0] and "mem_usage_gb" not in c), None)
        if rec is None:
            rec = {"phase": g[0]}
            res["cuda_graphs"].append(rec)
        rec.update(elapsed_s=g[1], mem_usage_gb=g[2], avail_after_gb=g[3])
    res["cuda_graph_gb"] = round(sum(c.get("mem_usage_gb") or 0 for c in res["cuda_graphs"]), 4) or (
        0.0 if res["cuda_graphs"] else None)
    res["swa_full_tokens"] = last("swa_pool", 0)
    res["swa_tokens"] = last("swa_pool", 1) if out.get("swa_pool") else last("swa_only", 0)
    res["post_capture_tokens"] = last("post_capture", 1)
    res["log_attention_backend"] = last("sa_attention_backend", 0)
    res["log_mem_fraction_static"] = last("sa_mem_fraction_static", 0)
    res["verbatim"] = [ln[:600] for ln in lines if any(k in ln for k in VERBATIM) and "server_args=" not in ln]
    return res


def model_dir(model: str, models: Path = MODELS) -> Path:
    return Path(model) if Path(model).is_dir() else models / model


def engine_kwargs(case: dict, models: Path = MODELS) -> dict:
    """The Engine(...) keyword arguments of a case (also what selftest.py resolves ServerArgs with)."""
    kw: dict = {
        "model_path": str(model_dir(case["model"], models)),
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "log_level": "info",
        "tp_size": 1,
        "random_seed": 0,
        "kv_cache_dtype": case.get("kv_cache_dtype", "auto"),
    }
    for k in ("attention_backend", "mem_fraction_static", "context_length", "max_total_tokens", "page_size",
              "chunked_prefill_size", "max_running_requests"):
        if case.get(k) is not None:
            kw[k] = case[k]
    if case.get("disable_cuda_graph"):
        kw["disable_cuda_graph"] = True
    kw.update(case.get("engine_args") or {})
    return kw


def classify(text: str) -> str:
    t = text.lower()
    if "out of memory" in t or "outofmemory" in t or "no gpu memory for the kv cache" in t or \
            "not enough memory" in t or "leave no gpu memory" in t:
        return "OOM"
    if "not supported" in t or "unsupported" in t:
        return "UNSUPPORTED"
    return "ERROR"


def gpu_used_mib() -> int | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
        return int(out.split()[0])
    except Exception:
        return None


def wait_gpu_free(limit_s: float = 30, under_mib: int = 2048) -> dict:
    t0 = time.time()
    first = used = gpu_used_mib()
    while used is not None and used >= under_mib and time.time() - t0 < limit_s:
        time.sleep(1)
        used = gpu_used_mib()
    return {"used_mib_first": first, "used_mib": used, "waited_s": round(time.time() - t0, 1)}


def _descendants(root: int) -> list[int]:
    """Every live process under `root`, children first, read from /proc (psutil need not be there)."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    out, todo = [], [root]
    while todo:
        at = todo.pop()
        kids = [p for p, pp in parent.items() if pp == at]
        out += kids
        todo += kids
    return out


def kill_children() -> None:
    """SIGKILL every process this one started (SGLang's scheduler, detokenizer, compilers), then SIGTERM our group
    (only from the main thread, which alone may ignore the signal for itself; the deadline thread calls this too)."""
    for pid in _descendants(os.getpid()):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if os.getpgrp() == os.getpid() and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with contextlib.suppress(Exception):
            os.killpg(os.getpid(), signal.SIGTERM)


def die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(1)
            if os.getppid() != parent:
                kill_children()
                os._exit(137)

    threading.Thread(target=watch, daemon=True).start()


class ChildFailed(RuntimeError):
    pass


def keep_alive_on_child_failure() -> bool:
    """A scheduler that fails while starting sends SIGQUIT to this process, whose handler (entrypoints/engine.py:
    1643-1653) calls kill_process_tree(os.getpid()): it kills the children, then this process (utils/common.py:
    2091-2095), and the record would never be written. Here the children are killed as before, and instead of
    killing itself the handler raises in the main thread, so the failure is recorded with the log's last lines.
    SGLang's own include_parent=False calls (Engine.shutdown) are unchanged."""
    try:
        import sglang.srt.entrypoints.engine as eng

        orig = eng.kill_process_tree
    except (ImportError, AttributeError):
        return False

    def kill_process_tree(parent_pid, include_parent=True, **kw):
        if parent_pid in (None, os.getpid()) and include_parent:
            orig(parent_pid, include_parent=False, **kw)
            raise ChildFailed("an SGLang child process failed while starting (SIGQUIT): see last_log_lines")
        return orig(parent_pid, include_parent=include_parent, **kw)

    eng.kill_process_tree = kill_process_tree
    return True


def jsonable(v, depth=0):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if depth > 4:
        return str(v)
    if isinstance(v, dict):
        return {str(k): jsonable(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [jsonable(x, depth + 1) for x in v]
    if hasattr(v, "__dataclass_fields__"):
        return {k: jsonable(getattr(v, k, None), depth + 1) for k in v.__dataclass_fields__}
    return str(v)


SERVER_ARGS = ("attention_backend", "prefill_attention_backend", "decode_attention_backend", "mem_fraction_static",
               "page_size", "kv_cache_dtype", "dtype", "chunked_prefill_size", "max_prefill_tokens",
               "max_running_requests", "max_total_tokens", "context_length", "cuda_graph_max_bs_decode",
               "cuda_graph_config", "disable_cuda_graph", "disable_radix_cache", "swa_full_tokens_ratio",
               "disable_hybrid_swa_memory", "moe_runner_backend", "quantization", "sampling_backend",
               "grammar_backend", "enable_torch_compile", "schedule_conservativeness")


def read_in_process(engine) -> dict:
    ip: dict = {"errors": []}
    sa = getattr(engine, "server_args", None)
    ip["server_args"] = {k: jsonable(getattr(sa, k, None)) for k in SERVER_ARGS}
    try:
        info = engine._scheduler_init_result.scheduler_infos[0]
        ip["scheduler_info"] = jsonable({k: v for k, v in dict(info).items() if not callable(v)})
    except Exception as e:
        ip["errors"].append(f"scheduler_info: {type(e).__name__}: {e}")
    try:  # what Engine.get_server_info asks (entrypoints/engine.py:1303-1318), bounded: a boot must not hang here
        import asyncio

        tm = engine.tokenizer_manager
        states = engine.loop.run_until_complete(asyncio.wait_for(tm.get_internal_state(), 10))
        st = (states or [{}])[0]
        ip["memory_usage"] = jsonable(st.get("memory_usage"))
        ip["effective_max_running_requests"] = st.get("effective_max_running_requests_per_dp")
    except BaseException as e:
        ip["errors"].append(f"get_internal_state: {type(e).__name__}: {e}")
    return ip


def summarize(result: dict, logs: dict) -> dict:
    ip = result.get("in_process") or {}
    sa = ip.get("server_args") or {}
    mu = ip.get("memory_usage") or {}
    si = ip.get("scheduler_info") or {}
    s = {k: logs.get(k) for k in ("kv_tokens", "kv_dtype", "kv_layout", "kv_gb", "kv_pools", "pool_end_avail_gb",
                                  "max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens",
                                  "max_running_requests", "context_len", "available_gpu_mem_gb",
                                  "load_begin_avail_gb", "weights_gb", "load_end_avail_gb", "model_class",
                                  "quantization_log", "cuda_graphs", "cuda_graph_gb", "swa_full_tokens",
                                  "swa_tokens", "post_capture_tokens", "dist_init_gb")}
    if s["max_total_num_tokens"] is None:
        s["max_total_num_tokens"] = si.get("max_total_num_tokens") or mu.get("token_capacity")
    for k in ("attention_backend", "prefill_attention_backend", "decode_attention_backend", "mem_fraction_static",
              "page_size", "cuda_graph_max_bs_decode", "disable_cuda_graph"):
        s[k] = sa.get(k)
    if s["attention_backend"] is None:
        s["attention_backend"] = logs.get("log_attention_backend")
    if s["mem_fraction_static"] is None:
        s["mem_fraction_static"] = logs.get("log_mem_fraction_static")
    s["server_kv_cache_dtype"] = sa.get("kv_cache_dtype")
    s["memory_usage"] = mu or None
    return s


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    arg, out_path = sys.argv[1], Path(sys.argv[2])
    log_path = Path(sys.argv[3]) if len(sys.argv) == 4 else out_path.with_suffix(".log")
    case = json.loads(arg) if arg.lstrip().startswith("{") else json.loads(Path(arg).read_text())
    if os.getpgrp() != os.getpid():
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
    die_with_parent()
    os.environ.update(ENV)
    os.environ.update({k: str(v) for k, v in (case.get("env") or {}).items()})
    log_path.parent.mkdir(parents=True, exist_ok=True)
    real_stdout = os.dup(1)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    result: dict = {"id": case.get("id"), "case": case, "host": os.uname().nodename, "log": str(log_path),
                    "env": {k: os.environ.get(k) for k in sorted(set(ENV) | set(case.get("env") or {}))}}
    result["gpu_before"] = wait_gpu_free()
    t0 = time.time()
    done = threading.Event()
    lock = threading.Lock()

    def finish(outcome: str | None = None, code: int | None = None) -> None:
        with lock:
            if done.is_set():
                return
            done.set()
            if outcome:
                result["outcome"] = outcome
            result["wall_s"] = round(time.time() - t0, 2)
            sys.stdout.flush()
            sys.stderr.flush()
            lines = log_path.read_text(errors="replace").splitlines()
            logs = parse_logs(lines)
            result["from_logs"] = logs
            result["summary"] = summarize(result, logs)
            result["log_line_count"] = len(lines)
            if result.get("outcome") != "OK":
                result["last_log_lines"] = [ln[:400] for ln in lines[-40:]]
            out_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = out_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(result, indent=1, default=str))
            tmp.replace(out_path)
            line = {"id": result["id"], "outcome": result.get("outcome"), "wall_s": result["wall_s"],
                    **{k: result["summary"].get(k) for k in ("attention_backend", "mem_fraction_static", "kv_tokens",
                                                            "max_total_num_tokens", "weights_gb", "kv_gb",
                                                            "cuda_graph_gb")}}
            os.write(real_stdout, (json.dumps(line) + "\n").encode())
            try:
                kill_children()
            finally:  # whatever the clean-up met, the process ends here (the deadline's whole point)
                os._exit(code if code is not None else (0 if result.get("outcome") == "OK" else 1))

    limit = float(case.get("timeout_s") or 150) - 15

    def deadline():
        if not done.wait(limit):
            result["exception"] = {"type": "Timeout", "message": f"no boot within {limit:.0f} s"}
            finish("TIMEOUT", 124)

    threading.Thread(target=deadline, daemon=True).start()
    try:
        import sglang

        result["release"] = getattr(sglang, "__version__", None)
        with contextlib.suppress(Exception):
            import torch

            result["torch"] = torch.__version__
        kwargs = engine_kwargs(case)
        result["flags"] = jsonable(kwargs)
        result["sigquit_kept_alive"] = keep_alive_on_child_failure()
        engine = sglang.Engine(**kwargs)
        result["boot_s"] = round(time.time() - t0, 2)
        result["outcome"] = "OK"
        result["in_process"] = read_in_process(engine)
    except BaseException as e:
        tb = traceback.format_exc()
        print(tb, file=sys.stderr)
        result["boot_s"] = round(time.time() - t0, 2)
        result["exception"] = {"type": type(e).__name__, "message": str(e)[-4000:], "traceback": tb[-6000:]}
        log_tail = log_path.read_text(errors="replace")[-20000:]
        result["outcome"] = classify(f"{type(e).__name__} {e} {log_tail}")
    finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
