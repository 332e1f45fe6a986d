"""SGLang behind the engine interface (kbtool/solve/engines.py): its release pinning, its own resolution of the
attention backends, page size and KV dtype (kbtool/solve/sglang/resolve.py, from its engine-backend, priority and
claim records), the error it raises where it refuses, and its token pool (kbtool/solve/sglang/pool.py).

The command line SGLang would be started with is the pasted `--sglang-args` (kbtool/solve/sglang/args.py) with
kb's own options filled in where the line is silent: --kv as --kv-cache-dtype, --gpus as --tp-size, --ctx as
--context-length, --block-size as --page-size.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KV_SPELLING = {"bf16": "bf16", "fp16": "auto", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "nvfp4": "nvfp4"}
"""kb's --kv -> SGLang's --kv-cache-dtype (fp16 has no spelling of its own: auto, the model's dtype)."""
KV_OF = {"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "bf16": "bf16", "bfloat16": "bf16", "nvfp4": "nvfp4",
         "fp4_e2m1": "nvfp4", "mxfp8": "fp8_e4m3"}
"""SGLang's resolved --kv-cache-dtype -> the dtype kb sizes (auto: the model's dtype)."""


def args_for(q: Any, model: Any) -> dict[str, Any]:
    """The ServerArgs fields SGLang would start with: the pasted line's, then kb's options where it is silent."""
    args = dict(q.engine_args or {})
    if "kv_cache_dtype" not in args and q.kv is not None:
        dtype = (model.unquantized_dtype if model is not None and model.weight_dtype not in ("bf16", "fp16")
                 else getattr(model, "weight_dtype", None)) or "bf16"
        args["kv_cache_dtype"] = "auto" if q.kv == dtype else KV_SPELLING.get(q.kv, q.kv)
    if "tp_size" not in args and q.gpus > 1:
        args["tp_size"] = q.gpus
    if "context_length" not in args and q.ctx:
        args["context_length"] = q.ctx
    if "page_size" not in args and q.block_size:
        args["page_size"] = q.block_size
    return args


def _registered(img: Any, backend: Any, release: str) -> bool:
    """Whether this SGLang release registers the backend (its engine-backend record's release scope)."""
    from kbtool.solve.conditions import compare_versions

    got = img.engine_data("sglang")["backends"].get(backend.backend_name)
    scope = got[3] if got else []
    return not scope or any((lo is None or compare_versions(release, lo) >= 0)
                            and (hi is None or compare_versions(release, hi) <= 0) for lo, hi in scope)


class Sglang:
    name = "sglang"
    label = "SGLang"

    def parse_line(self, text: str) -> Any:
        from kbtool.solve.sglang.args import parse

        return parse(text)

    def line_options(self, line: Any) -> dict[str, Any]:
        """kb's options an SGLang launch line names (kb's own, when given, win)."""
        f = line.fields
        kv = f.get("kv_cache_dtype")
        return {
            "model": line.model, "ctx": str(f["context_length"]) if f.get("context_length") else None,
            "kv": None if kv in (None, "auto") else KV_OF.get(str(kv), str(kv)), "gpus": f.get("tp_size"),
            "kv_pasted": kv,  # as typed, "auto" included (a conflict with kb's --kv is refused)
            "dtype": f["dtype"] if f.get("dtype") not in (None, "auto") else None,
        }

    def apply_line(self, q: Any, line: Any) -> None:
        q.engine_args, q.engine_ignored = dict(line.fields), list(line.unknown)
    block_size = None  # SGLang's page size comes from its resolution (1 unless a backend forces one)
    release_flag = "--sglang"

    def pin_release(self, img: Any, q: Any) -> None:
        from kbtool.errors import UsageError
        from kbtool.solve.sglang import resolve as sglang_resolve

        known = sglang_resolve.releases(img)
        asked = q.sglang or q.libs.get("sglang")
        if asked is not None and asked not in known:
            raise UsageError(f"--sglang {asked}: the KB records SGLang's resolution for "
                             f"{', '.join(known) or 'no release'} only",
                             fix=f"use --sglang {known[-1]} (the newest recorded)" if known else "leave out --sglang")
        q.sglang = asked or (known[-1] if known else None)
        if q.sglang:
            q.libs["sglang"] = q.sglang

    def release(self, q: Any) -> str | None:
        version: str | None = q.sglang
        return version

    def handled(self, claim: str) -> str | None:
        return None

    def backend_outcome(self, cx: Any, backend: Any, env: dict[str, Any]) -> Any:
        """What SGLang does when asked for this backend (--attention-backend NAME): its resolution, with its own
        error where it refuses; a backend it switches away from is a caveat naming what runs instead."""
        from kbtool.solve.answer import Reason
        from kbtool.solve.gates import Outcome, structural
        from kbtool.solve.sglang import facts as sglang_facts
        from kbtool.solve.sglang import resolve as sglang_resolve

        q = cx.q
        if q.sglang is None or not env.get("gpu"):
            return None
        if not _registered(cx.img, backend, q.sglang):
            return Outcome(status="rejected", reasons=[structural(
                "NOT_REGISTERED", f"SGLang {q.sglang} does not register {backend.backend_name}", "engine",
                subject=backend.id)])
        acc = cx.img.accelerator(env["gpu"])
        key = f"sglang:{acc.id}:{backend.backend_name}"
        r = cx.engine_cache.get(key)
        if r is None:
            args = args_for(q, cx.model)
            for k in ("prefill_attention_backend", "decode_attention_backend"):
                args.pop(k, None)
            args["attention_backend"] = backend.backend_name
            facts = sglang_facts.model_facts_from_record(cx.model) if cx.model is not None else {}
            platform = sglang_facts.platform_facts(acc, env.get("cc"), env.get("cuda") or cx.img.cuda)
            r = cx.engine_cache[key] = sglang_resolve.resolve(cx.img, q.sglang, platform, facts, args)
        if r.get("error"):
            claim = next((c for c in cx.img.claims(backend.id) if c.id == r.get("claim")), None)
            if claim is None:
                claim = next((c for a in cx.img.backends("sglang") for c in cx.img.claims(a.id)
                              if c.id == r.get("claim")), None)
            return Outcome(status="rejected", reasons=[Reason(
                claim=r.get("claim") or "", code=claim.code if claim is not None else "ENGINE_ERROR",
                message=f"SGLang {q.sglang}: {r['error']}: {r['message']}", verification=claim.status
                if claim is not None else "structural", layer="engine", subject=backend.id)])
        runs = {r.get("prefill"), r.get("decode")}
        if backend.backend_name not in runs:
            return Outcome(status="caveat", caveats=[structural(
                "ENGINE_SWITCHES", f"asked for {backend.backend_name}, SGLang {q.sglang} runs prefill "
                f"{r.get('prefill')}, decode {r.get('decode')} ({', '.join(sorted((r.get('by') or {}).values()))})",
                "engine", subject=backend.id)])
        return Outcome()

    def resolution(self, cx: Any, acc: Any, env: dict[str, Any]) -> dict[str, Any]:
        """SGLang's own resolution for this accelerator (once per accelerator and query)."""
        from kbtool.solve.sglang import facts as sglang_facts
        from kbtool.solve.sglang import resolve as sglang_resolve

        key = f"sglang:{acc.id}"
        got: dict[str, Any] | None = cx.engine_cache.get(key)
        if got is None:
            facts = sglang_facts.model_facts_from_record(cx.model) if cx.model is not None else {}
            platform = sglang_facts.platform_facts(acc, env.get("cc"), env.get("cuda") or cx.img.cuda)
            got = sglang_resolve.resolve(cx.img, cx.q.sglang, platform, facts, args_for(cx.q, cx.model))
            cx.engine_cache[key] = got
        return got

    def priority(self, cx: Any, env: dict[str, Any]) -> list[str]:
        """The backends SGLang resolved, prefill first (its engine-backend ids)."""
        acc = cx.img.accelerator(env["gpu"]) if env.get("gpu") else None
        if acc is None or cx.q.sglang is None:
            return []
        r = self.resolution(cx, acc, env)
        return [f"sglang-{b}" for b in dict.fromkeys((r.get("prefill"), r.get("decode"))) if b]

    def memory(self, cx: Any, acc: Any, env: dict[str, Any], kernels: list[Any],
               assumed: dict[str, Any]) -> tuple[Any, list[str]]:
        from kbtool.solve.sglang.pool import memory_for

        return memory_for(self, cx, acc, env, assumed)

    def decide(self, cx: Any, acc: Any, envs: dict[str, dict[str, Any]], assumed: dict[str, Any], verdict: str,
               summary: str, memory: Any, backends: list[Any], kernels: list[Any]) -> tuple[Any, str, str, list[Any]]:
        from kbtool.solve.context import ctx_over_model

        q = cx.q
        if q.sglang is None:
            return None, verdict, summary, []
        r = self.resolution(cx, acc, envs.get("decode") or next(iter(envs.values())))
        where = f"{acc.id}" + (f" x{q.gpus}" if q.gpus > 1 else "")
        block = block_of(r, q.sglang, (memory.engine_report if memory is not None else None))
        label = block["label"] = f"SGLang {q.sglang}"
        present(block)
        if r.get("error"):
            block["preflight"] = f"{r['error']}: {r['message']}"
            return block, "no", f"{where}: {label} refuses to start: {r['message']}", []
        pool_error = (memory.engine_report or {}).get("error") if memory is not None else None
        if pool_error:
            block["preflight"] = pool_error
            return block, "no", f"{where}: {label} would stop at start-up: {pool_error}", []
        block["preflight"] = preflight(block)
        if (memory is not None and memory.fits is False) or ctx_over_model(cx):
            return block, verdict, summary, []
        text = f"{where}: yes with {block['prefill']} prefill / {block['decode']} decode ({label}'s choice"
        text += f", page size {block['page_size']})"
        if memory is not None and memory.fits:
            text += f"; KV {memory.kv_bytes / 1e9:,.1f} GB fits in {memory.available_bytes / 1e9:,.1f} GB"
        return block, "yes", text, []


def block_of(r: dict[str, Any], release: str, pool: dict[str, Any] | None) -> dict[str, Any]:
    """The `engine` part of the answer for SGLang."""
    out: dict[str, Any] = {"engine": "sglang", "sglang": release}
    if r.get("error"):
        out.update(error=r["message"], error_type=r["error"], where=r.get("where"), claim=r.get("claim"))
        return out
    for k in ("prefill", "decode", "attention_backend", "page_size", "kv_cache_dtype", "dsa_prefill_backend",
              "dsa_decode_backend", "mem_fraction_static", "chunked_prefill_size", "decode_graph",
              "decode_graph_max_bs", "prefill_graph"):
        if r.get(k) is not None:
            out[k] = r[k]
    out["selected"] = f"sglang-{r['decode']}" if r.get("decode") else None
    out["forced_by"] = dict(r.get("by") or {})
    if pool:
        out["pool"] = pool
    return out


def present(e: dict[str, Any]) -> None:
    """The words the renderer shows: headline, the backend per phase, the explain view's detail lines, and the
    digest --engine vllm,sglang compares."""
    label = e["label"]
    pool = e.get("pool") or {}
    if e.get("error"):
        e["headline"] = f"{label}: {e['error_type']}: {e['error']}"
        e["verb"] = f"refuses: {e['error_type']}: {e['error']}"
        e["details"] = [("raised at: ", f"{e.get('where')} (claim {e.get('claim')})")]
    else:
        by = e.get("forced_by") or {}
        e["choice"] = {"prefill": e["prefill"], "decode": e["decode"]}
        same = e["prefill"] == e["decode"]
        e["headline"] = (f"{label} resolves {e['prefill']}" if same else
                         f"{label} resolves prefill {e['prefill']}, decode {e['decode']}")
        e["headline"] += f"; page size {e['page_size']}" + (f" ({by['page_size']})" if by.get("page_size") else "")
        if e.get("kv_cache_dtype"):
            e["headline"] += f"; --kv-cache-dtype {e['kv_cache_dtype']}"
        e["verb"] = e["headline"][len(label) + 1:]
        e["details"] = [("set by: ", ", ".join(f"{k} <- {v}" for k, v in sorted(by.items())))] if by else []
        if e.get("dsa_prefill_backend"):
            e["details"].append(("DSA: ", f"prefill {e['dsa_prefill_backend']}, decode {e.get('dsa_decode_backend')}"))
        if e.get("mem_fraction_static") is not None:
            e["details"].append(("memory: ", f"mem_fraction_static {e['mem_fraction_static']}, chunked_prefill_size "
                                             f"{e.get('chunked_prefill_size')}, decode CUDA-graph max bs "
                                             f"{e.get('decode_graph_max_bs')}"))
    e["digest"] = {"label": label, "error": e.get("error"), "prefill": e.get("prefill"), "decode": e.get("decode"),
                   "page_size": e.get("page_size"), "pool_tokens": pool.get("max_total_num_tokens"),
                   "page_size_why": (f"SGLang: {(e.get('forced_by') or {}).get('page_size')}"
                                     if (e.get("forced_by") or {}).get("page_size") else None)}


def preflight(block: dict[str, Any]) -> str:
    """What SGLang would log at start-up for this line: its backends, then its KV pool line."""
    text = f"attention backend: prefill {block['prefill']}, decode {block['decode']}; page_size {block['page_size']}"
    pool = block.get("pool")
    if pool:
        text += f"; {pool['kv_line']}; max_total_num_tokens={pool['max_total_num_tokens']}, " \
                f"max_running_requests={pool['max_running_requests']}"
    return text


ENGINE = Sglang()
