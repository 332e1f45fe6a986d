"""vLLM behind the engine interface (kbtool/solve/engines.py): its release pinning, priority lists and selection
(kbtool/solve/vllm/selection.py, from its engine-priority and backend claim records), the pick's agreement with
kb's kernel layer (kbtool/solve/pick.py), its default block size and the kernel caveats it handles by default."""

from __future__ import annotations

from kbtool.solve.vllm import selection as engine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HANDLED = {
    "fa3-fp8-long-context-two-level-accumulation":
        "handled: vLLM's flash-attention fork keeps two-level FP8 accumulation on by default",
}


class Vllm:
    name = "vllm"
    label = "vLLM"
    release_flag = "--vllm"

    def parse_line(self, text: str) -> Any:
        from kbtool.solve.vllm.args import parse

        return parse(text)

    def line_options(self, serve: Any) -> dict[str, Any]:
        """kb's options a `vllm serve` line names (kb's own, when given, win)."""
        from kbtool.solve.vllm.args import QUANT_WEIGHTS

        weights = None
        if serve.quantization:
            weights = QUANT_WEIGHTS.get(serve.quantization.lower())
            if weights is None:
                serve.ignored.append(f"--quantization {serve.quantization} (weights sized as the checkpoint says)")
        return {
            "model": serve.model,  # an id, alias, config path or Hugging Face id (kbtool/solve/modelref.py)
            "ctx": str(serve.max_model_len) if serve.max_model_len and serve.max_model_len > 0 else None,
            "kv": serve.kv_cache_dtype if serve.kv_cache_dtype and serve.kv_cache_dtype != "auto" else None,
            "kv_pasted": serve.kv_cache_dtype,  # as typed, "auto" included (a conflict with kb's --kv is refused)
            "gpus": serve.tp, "util": serve.gpu_memory_utilization, "block_size": serve.block_size,
            "dtype": serve.dtype if serve.dtype and serve.dtype != "auto" else None,
            "max_num_batched_tokens": serve.max_num_batched_tokens, "weights": weights,
        }

    def apply_line(self, q: Any, serve: Any) -> None:
        """The line's vLLM-only settings onto the query (what kb's options do not name)."""
        q.attention_backend = serve.attention_backend
        q.kv_cache_dtype = serve.kv_cache_dtype
        q.vllm_ignored = serve.ignored
        q.max_num_seqs, q.enforce_eager = serve.max_num_seqs, serve.enforce_eager
        q.pp, q.dp = max(1, serve.pp or 1), max(1, serve.dp or 1)
        q.ctx_auto = serve.max_model_len == -1 and q.ctx is None
        q.kv_cache_memory = serve.kv_cache_memory
    block_size = 16  # vLLM's default --block-size on CUDA for the non-MLA backends

    def pin_release(self, img: Any, q: Any) -> None:
        engine.pin_release(img, q)

    def priority(self, cx: Any, env: dict[str, Any]) -> list[str]:
        version = cx.q.vllm or cx.q.libs.get("vllm") or engine.default_version(cx.img)
        return engine.priority_order(cx.img, env, version, engine.platform_of(env)) if version else []

    def backend_outcome(self, cx: Any, backend: Any, env: dict[str, Any]) -> Any:
        return None  # kb applies each backend's claims for the pinned release (kbtool/solve/vllm/selection.py)

    def handled(self, claim: str) -> str | None:
        return HANDLED.get(claim)

    def release(self, q: Any) -> str | None:
        version: str | None = q.vllm or q.libs.get("vllm")
        return version

    def memory(self, cx: Any, acc: Any, env: dict[str, Any], kernels: list[Any],
               assumed: dict[str, Any]) -> tuple[Any, list[str]]:
        from kbtool.solve.vllm.memory import memory_for

        return memory_for(cx, acc, env, kernels, assumed)

    def decide(self, cx: Any, acc: Any, envs: dict[str, dict[str, Any]], assumed: dict[str, Any], verdict: str,
               summary: str, memory: Any, backends: list[Any], kernels: list[Any]) -> tuple[Any, str, str, list[Any]]:
        from kbtool.solve.pick import with_pick

        block, verdict, summary = engine.apply_to_answer(cx, acc, envs, assumed, verdict, summary, memory)
        if block is not None:
            present(block)
            report = getattr(memory, "vllm_report", None) or {}
            block["digest"] = {
                "label": block["label"], "error": block.get("error"),
                "prefill": (block.get("choice") or {}).get("prefill"),
                "decode": (block.get("choice") or {}).get("decode"),
                "page_size": report.get("block_size") or assumed.get("block_size"),
                "pool_tokens": report.get("kv_cache_tokens"),
            }
        where = f"{acc.id}" + (f" x{cx.q.gpus}" if cx.q.gpus > 1 else "")
        verdict, summary, first = with_pick(block, backends, kernels, where, verdict, summary)
        return block, verdict, summary, first


def present(e: dict[str, Any]) -> None:
    """The words the renderer shows for vLLM's selection: label, headline, the backend per phase (the MLA
    prefill path for prefill), the explain view's verb and detail lines."""
    def name(bid: str) -> str:
        return next((b["name"] for b in e["backends"] if b["id"] == bid), bid)

    e["label"] = f"vLLM {e['vllm']}"
    mla = e.get("mla")
    if e.get("between"):  # an unswept release (kbtool/solve/vllm/grid.py): the releases around it, by name
        e["headline"] = f"vLLM {e['vllm']}: {e['between']}"
        e["verb"] = f"not recorded: {e['between']}"
    elif not e.get("selected"):
        e["headline"] = f"vLLM {e['vllm']}: {e['error']}"
        e["verb"] = f"error: {e['error']}"
    else:
        text = f"vLLM {e['vllm']} selects {name(e['selected'])}"
        if mla and mla["prefill"]:
            text += f" (decode); prefill {mla['prefill'][0]}, {mla['prefill_shape']}"
        elif mla:
            text += f" (decode); MLA prefill order not recorded for {e['vllm']}"
        ids = [b["id"] for b in e["backends"]]  # vLLM's priority order: the refusals that matter come first
        ahead = e["backends"][:ids.index(e["selected"])] if e["selected"] in ids else e["backends"]
        before = [b for b in ahead if b["status"] == "rejected"][:2]
        if before:
            text += "; refused: " + ", ".join(f"{b['name']} ({b['reasons'][0].split(' (')[0]})" for b in before
                                              if b["reasons"])
        e["headline"] = text
        e["verb"] = f"selects {name(e['selected'])}"
        prefill = name(e["selected"]) if not mla else str(mla["prefill"][0]) if mla["prefill"] else \
            "MLA prefill path not recorded"
        e["choice"] = {"prefill": prefill,
                       "decode": name(e["selected"])}
    if e.get("source") and not e.get("between"):
        e["headline"] += f" [{e['source']}]"
    if mla:
        order = " > ".join(mla["prefill"]) or mla.get("prefill_unrecorded", "not recorded")
        e["details"] = [("MLA: ", f"decode {mla['decode']}; prefill {order} "
                                  f"({mla['prefill_shape']}); KV {mla['kv_layout']}")]
        if mla.get("prefill_source"):
            e["details"].append(("", f"prefill order: {mla['prefill_source']}"))
        if mla.get("prefill_refused"):
            e["details"].append(("", "prefill refused by default: " + "; ".join(mla["prefill_refused"])))
        if mla.get("indexer"):
            e["details"].append(("", mla["indexer"]))


ENGINE = Vllm()
