"""Probe: boot SGLang for real with dummy weights and record the token pool it sizes (issue 27).

Each case (probes/sglang_boot/cases.json: a model config under probes/vllm_boot/models/, KV dtype, attention
backend, mem_fraction_static, CUDA graphs on or off, context length and token cap) is one
`sglang.Engine(..., load_format="dummy", skip_tokenizer_init=True)` in a fresh process
(probes/sglang_boot/boot_case.py), which SGLang's scheduler and detokenizer processes are children of. The case's
metrics are what SGLang itself reports: the "KV Cache is allocated" line (#tokens, K/V or KV size), "Memory pool
end", the scheduler's max_total_num_tokens line, "Load weight end" (weights' memory), the CUDA-graph capture lines,
and the resolved ServerArgs (attention backend, mem_fraction_static, page size) read in-process.

SGLang travels to the GPU host as a trimmed bundle (probes/sglang_boot/pack.sh): its pieces go to ~/stash in
earlier device calls (probes/host-run.sh stash .boot-sgl/pK); the first case unpacks them into /tmp/sgl-site
(KB_SGL_SITE), which only the boot processes put on their path. No claim is judged here: the measured rows are
what kb's SGLang memory model is to be held to.

Clean-up: boot_case.py leads its own process group and kills every process it started before it exits; run()
kills that group when the case outlives its timeout, and waits until the group is gone before the next case.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.judges import PROBES
from kbtool.probe.judges import _booted as booted
from kbtool.probe.spec import ProbeSpec

MODELS = PROBES / "vllm_boot" / "models"


SPEC = ProbeSpec(
    id="sglang-boot",
    version=1,
    order=91,
    title="SGLang boots with dummy weights: its token pool and memory lines",
    claims=[],
    requires={"archs": None, "packages": ["torch"]},
    timeout_s=150,
    untestable="SGLang is unpacked on the GPU host from probes/sglang_boot/pack.sh's bundle (no network there).",
)


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """No claim: the boots are measurements (see `measured`)."""
    return []


def measured(observations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per boot that came up: SGLang's token pool (the scheduler's max_total_num_tokens, else the KV Cache line's
    #tokens) and, where the case left it to SGLang, the mem_fraction_static it chose; under the flags and the model
    facts a query is matched on, with the memory lines as metrics."""
    rows = []
    for o in observations:
        p, m = o.get("params") or {}, o.get("metrics") or {}
        tokens = m.get("max_total_num_tokens") or m.get("kv_tokens")
        if o.get("outcome") != "OK" or not tokens:
            continue
        model = str(p.get("model"))
        facts = booted.model_facts(MODELS, model)
        if facts is None:
            continue
        cond = {"case": p.get("id"), "model": model, **facts, "sglang": m.get("release"),
                "attention_backend": m.get("attention_backend"), "kv_cache_dtype": p.get("kv_cache_dtype", "auto"),
                "mem_fraction_static": m.get("mem_fraction_static"),
                "mem_fraction_static_given": p.get("mem_fraction_static") is not None,
                "disable_cuda_graph": bool(p.get("disable_cuda_graph")), "context_length": p.get("context_length"),
                "max_total_tokens": p.get("max_total_tokens"), "page_size": m.get("page_size"), "tp_size": 1}
        metrics = {k: m.get(k) for k in ("kv_tokens", "kv_gb", "kv_dtype", "kv_layout", "weights_gb",
                                         "load_begin_avail_gb", "load_end_avail_gb", "pool_end_avail_gb",
                                         "available_gpu_mem_gb", "cuda_graph_gb", "max_running_requests",
                                         "chunked_prefill_size", "context_len", "swa_tokens", "swa_full_tokens")}
        rows.append({"quantity": "max_total_num_tokens", "value": int(tokens), "unit": "tokens", **cond,
                     "metrics": metrics})
        mfs = m.get("mem_fraction_static")
        if p.get("mem_fraction_static") is None and isinstance(mfs, int | float):
            rows.append({"quantity": "mem_fraction_static", "value": float(mfs), "unit": "1", **cond, "metrics": {}})
    return rows


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for o in observations:
        p, m = o.get("params") or {}, o.get("metrics") or {}
        rows.append(f"{p.get('id')}: {o.get('outcome')} {m.get('attention_backend')} mfs {m.get('mem_fraction_static')}"
                    f" weights {m.get('weights_gb')} GB, kv {m.get('kv_gb')} GB,"
                    f" {m.get('max_total_num_tokens')} tokens,"
                    f" graphs {m.get('cuda_graph_gb')} GB, {m.get('boot_s')} s"
                    + (f" | {str(o.get('message'))[:160]}" if o.get("message") else ""))
    return {"outcomes": rows, "measured": measured(observations)}
