"""Probe: boot vLLM for real with dummy weights and record the memory numbers it reports (issue 25).

Each case (probes/vllm_boot/cases.json: a model config under probes/vllm_boot/models/, max_model_len, memory
utilization, KV dtype, eager or CUDA graphs) is one `LLM(..., load_format="dummy")` in a fresh process
(probes/vllm_boot/boot_case.py: vLLM is configured once per process). The case's metrics are what vLLM itself
reports: the backend and FlashAttention version, weights, activation peak, non-torch memory, CUDA-graph estimate
and actual, requested and available KV memory, block size and number of blocks, the KV cache groups with their
page sizes and padding lines, and the "GPU KV cache size" and "Maximum concurrency" lines verbatim.

vLLM travels to the GPU host as a trimmed bundle (probes/vllm_boot/pack.sh). No claim is judged here: kb's memory
model is held to these records by tests/probe/test_vllm_boot_memory.py, which recomputes every boot's prediction.
"""

from __future__ import annotations

import json
from typing import Any

from kbtool.probe.judges import PROBES
from kbtool.probe.judges import _booted as booted
from kbtool.probe.spec import ProbeSpec

HERE = PROBES / "vllm_boot"


SPEC = ProbeSpec(
    id="vllm-boot",
    version=1,
    order=90,
    title="vLLM boots with dummy weights: its memory numbers",
    claims=["vllm-fa3-fp8-kv-needs-bf16-model"],
    requires={"archs": None, "packages": ["torch", "vllm"]},
    timeout_s=260,
    untestable="vLLM is installed on the GPU host from probes/vllm_boot/pack.sh's bundle (no network there).",
)


FP16_FP8 = "vllm-fa3-fp8-kv-needs-bf16-model"


FP8_OUT_BF16 = "output must have dtype BF16"  # FA-3's check (vllm-project/flash-attention hopper/flash_api.cpp)


def model_dtype(case: dict[str, Any]) -> str | None:
    """The dtype vLLM's --dtype auto gives the case's model: its config's torch_dtype (fp32 checkpoints run bf16)."""
    path = HERE / "models" / str(case.get("model")) / "config.json"
    if not path.is_file():
        return None
    cfg = json.loads(path.read_text(encoding="utf-8"))
    dt = cfg.get("torch_dtype") or cfg.get("dtype") or (cfg.get("text_config") or {}).get("torch_dtype")
    return {"float16": "fp16", "bfloat16": "bf16", "float32": "bf16"}.get(str(dt))


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    """FLASH_ATTN (FA-3) with fp8 KV: an fp16 model must fail at its first attention call with FA-3's bf16-output
    error; a bf16 model with fp8 KV on the same backend is the control that must boot."""
    sm, version = env.get("architecture"), (env.get("libraries") or {}).get("vllm")
    scope = {"sm": sm, "vllm": version}
    fp16: list[Any] = []
    bf16: list[Any] = []
    for o in observations:
        p, m = o.get("params") or {}, o.get("metrics") or {}
        if p.get("kv_cache_dtype") != "fp8" or m.get("attention_backend") != "FLASH_ATTN":
            continue
        (fp16 if model_dtype(p) == "fp16" else bf16).append(o)
    if not fp16:
        return []
    failed = [o for o in fp16 if o.get("outcome") == "ERROR" and FP8_OUT_BF16 in str(o.get("message"))]
    booted = [o for o in bf16 if o.get("outcome") == "OK"]
    names = ", ".join(str((o.get("params") or {}).get("id")) for o in fp16)
    if len(failed) == len(fp16) and booted:
        return [{"claim": FP16_FP8, "verdict": "confirmed", "scope": scope,
                 "detail": f"vLLM {version} FLASH_ATTN fa3, fp8 KV: fp16 model ({names}) sized its KV cache, then "
                           f"failed: '{FP8_OUT_BF16}'; {len(booted)} bf16 models with fp8 KV booted (control)"}]
    if any(o.get("outcome") == "OK" for o in fp16):
        return [{"claim": FP16_FP8, "verdict": "contradicted", "scope": scope,
                 "detail": f"vLLM {version} FLASH_ATTN with fp8 KV booted an fp16 model ({names})"}]
    return [{"claim": FP16_FP8, "verdict": "inconclusive", "scope": scope,
             "detail": f"fp16 model with fp8 KV ({names}) failed otherwise or no bf16 control booted"}]


def boots_unquantized(model: str, metrics: dict[str, Any]) -> bool:
    """True where vLLM 0.24.0 booted a GPTQ checkpoint unquantized because only its config.json was there: with no
    `modules_in_block_to_quantize` in the quantization_config, AutoGPTQConfig.maybe_update_config
    (layers/quantization/auto_gptq.py:270-294) lists the quantized layers from the checkpoint's safetensors
    headers, finds none, and every linear layer is built in the model dtype. A real checkpoint does not boot so;
    boot_case.py now patches such a folder and says so in the boot's `config_patch`."""
    if metrics.get("config_patch"):
        return False
    d = HERE / "models" / model
    if not (d / "config.json").is_file():
        return False
    q = json.loads((d / "config.json").read_text(encoding="utf-8")).get("quantization_config") or {}
    return (q.get("quant_method") == "gptq" and not q.get("modules_in_block_to_quantize")
            and not any(d.glob("*.safetensors")))


def conditions(engine_args: dict[str, Any]) -> dict[str, Any]:
    """What a case's extra engine arguments change that a query must repeat to be matched by its boot: the model
    dtype forced to float32 (`dtype`), the text-only serve (`text_only`: --language-model-only), and a speculative
    draft (`speculative`: "method:tokens"), and prefix caching set either way (`prefix_caching`: it sets a hybrid
    model's Mamba state mode, vllm_planning.state_mode). A case without them carries none of these keys."""
    out: dict[str, Any] = {}
    if engine_args.get("enable_prefix_caching") is not None:
        out["prefix_caching"] = bool(engine_args["enable_prefix_caching"])
    if str(engine_args.get("dtype")) in ("float32", "float"):
        out["dtype"] = "fp32"
    if engine_args.get("language_model_only"):
        out["text_only"] = True
    spec = engine_args.get("speculative_config")
    if isinstance(spec, dict):
        method = str(spec.get("method"))  # vLLM takes a model-specific name (qwen3_5_mtp, ...) as mtp
        out["speculative"] = f"{'mtp' if 'mtp' in method else method}:{spec.get('num_speculative_tokens')}"
    return out


def measured(observations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per boot that came up as a real checkpoint would: vLLM's "GPU KV cache size" (tokens) with its
    "Maximum concurrency" and pool, under the flags and the model facts a query is matched on."""
    rows = []
    for o in observations:
        p, m = o.get("params") or {}, o.get("metrics") or {}
        model = str(p.get("model"))
        if o.get("outcome") != "OK" or not m.get("kv_cache_tokens") or boots_unquantized(model, m):
            continue
        facts = booted.model_facts(HERE / "models", model)
        if facts is None:
            continue
        flags = m.get("flags") or {}
        # a case that forces the model runner (VLLM_USE_V2_MODEL_RUNNER in its env) is matched only by a line that
        # forces it too; the others run the release's default runner and carry no such condition
        forced = (p.get("env") or {}).get("VLLM_USE_V2_MODEL_RUNNER")
        runner = {} if forced is None else {"model_runner": "V2" if int(forced) else "V1"}
        rows.append({**runner, **conditions(p.get("engine_args") or {}),
                     "quantity": "kv_cache_tokens", "value": int(m["kv_cache_tokens"]), "unit": "tokens",
                     "case": p.get("id"), "model": model, **facts, "vllm": m.get("release"),
                     "max_model_len": p.get("max_model_len"), "gpu_memory_utilization": p.get("gpu_memory_utilization"),
                     "kv_cache_dtype": p.get("kv_cache_dtype"), "enforce_eager": bool(p.get("enforce_eager")),
                     "max_num_batched_tokens": flags.get("max_num_batched_tokens"),
                     "max_num_seqs": flags.get("max_num_seqs"),
                     "metrics": {"max_concurrency": m.get("max_concurrency"), "num_gpu_blocks": m.get("num_gpu_blocks"),
                                 "block_size": m.get("block_size"), "available_kv_gib": m.get("available_kv_gib")}})
    return rows


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for o in observations:
        p, m = o.get("params") or {}, o.get("metrics") or {}
        rows.append(f"{p.get('id')}: {o.get('outcome')} {m.get('attention_backend')} fa{m.get('flash_attn_version')} "
                    f"kv {m.get('available_kv_gib')} GiB, {m.get('kv_cache_tokens')} tokens, "
                    f"{m.get('max_concurrency')}x" + (f" | {str(o.get('message'))[:160]}" if o.get("message") else ""))
    return {"outcomes": rows, "measured": measured(observations)}
