"""SGLang behind the engine interface (kbtool/solve/engines/registry.py): its release pinning, its own resolution of the
attention backends, page size and KV dtype (kbtool/solve/engines/sglang/resolve.py, from its engine-backend, priority
and
claim records), the error it raises where it refuses, and its token pool (kbtool/solve/engines/sglang/pool.py).

The command line SGLang would be started with is the pasted `--sglang-args` (kbtool/solve/engines/sglang/args.py) with
kb's own options filled in where the line is silent: --kv as --kv-cache-dtype, --gpus as --tp-size, --ctx as
--context-length, --block-size as --page-size.
"""

from __future__ import annotations

from kbtool.solve.engines.base import Engine
from kbtool.solve.engines.results import Line, Option, Pick, ReleaseChange
from kbtool.solve.engines.sglang.serverargs import KV_OF, args_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.context import Ctx
    from kbtool.solve.gates import Outcome
    from kbtool.solve.image import AcceleratorV, BackendV, Image
    from kbtool.solve.parts import BackendAnswer, KernelAnswer, Memory
    from kbtool.solve.query import Query


def _registered(img: Any, backend: Any, release: str) -> bool:
    """Whether this SGLang release registers the backend (its engine-backend record's release scope)."""
    from kbtool.solve.conditions import compare_versions

    got = img.engine_data("sglang")["backends"].get(backend.backend_name)
    scope = got[3] if got else []
    return not scope or any((lo is None or compare_versions(release, lo) >= 0)
                            and (hi is None or compare_versions(release, hi) <= 0) for lo, hi in scope)


ATTN_DP = "--attn-dp-size"  # attention DP as the unmodelled-memory flag (or --enable-dp-attention, as typed)
ATTN_DP_MOVES = "attention weights replicated per attention-DP group (model code) and SGLang's DP-attention reserve"


def _check_attn_dp(fields: dict[str, Any], width: int) -> None:
    """SGLang's own refusals of an attention-DP layout: --attn-dp-size with --dp-size both above one (0.5.23
    arg_groups/parallel_hook.py:285-292, ValueError), and a TP size the groups do not divide (parallel_hook.py:326,
    0.5.17 server_args.py:6464, an assert)."""
    from kbtool.errors import UsageError

    tp = int(fields.get("tp_size") or 1)
    if int(fields.get("attn_dp_size") or 1) > 1 and int(fields.get("dp_size") or 1) > 1:
        raise UsageError(f"--sglang-args: --dp-size {fields['dp_size']} with --attn-dp-size {fields['attn_dp_size']}:"
                         " SGLang refuses data-parallel replicas combined with attention data parallelism",
                         fix="drop one of them (--attn-dp-size N replaces --dp-size N --enable-dp-attention)")
    if tp % width:
        raise UsageError(f"--sglang-args: tp_size {tp} is not divisible by the attention-DP size {width}; SGLang "
                         "asserts tp_size % attn_dp_size == 0", fix=f"use a TP size that is a multiple of {width}")


class Sglang(Engine):
    name = "sglang"
    label = "SGLang"
    options = (
        Option("--sglang", "release", "VERSION", "SGLang release for --engine sglang (default: the newest recorded)."),
        Option("--sglang-args", "line", "CMD", 'An SGLang command, e.g. "python -m sglang.launch_server '
               '--model-path M --tp 2": pre-flight answer (backends, page size, token pool, or SGLang\'s error).'),
    )
    block_size = None  # SGLang's page size comes from its resolution (1 unless a backend forces one)
    # ModelConfig._derive_context_length (0.5.23 sglang/srt/configs/model_config.py:1291-1316; 0.5.17 :770-792):
    # a --context-length beyond the config's raises ValueError unless this variable is set
    long_context = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, which SGLang warns may give incorrect outputs"
    # flags whose GPU memory kb does not model, named by what each flag is for; they only make an answer
    # conditional (no number rests on them). Not yet read against sglang/srt/server_args.py for a release.
    memory_flags = {"--cpu-offload-gb": "weights offloaded to host memory", "--speculative-algorithm": "a draft "
                    "model and its KV cache", "--enable-lora": "LoRA adapter weights", "--lora-paths": "LoRA adapter "
                    "weights", "--pp-size": "pipeline stages, each holding its share of the layers, weights and KV "
                    "cache (kb sizes SGLang's pool for one stage holding them all)",
                    # attention DP (args.attn_dp): kb sizes the KV cell per attention-TP rank as SGLang does
                    # (pool.fit); what it does not model is each model's own attention-weight split (e.g. 0.5.23
                    # models/qwen3_moe.py:502-517 shards attention over attn_tp_size, models/llama.py:181-194 over
                    # tp_size) and the DP-attention terms of SGLang's mem_fraction_static (docs/sglang-resolution.md)
                    ATTN_DP: ATTN_DP_MOVES, "--enable-dp-attention": ATTN_DP_MOVES}

    def parse_line(self, text: str, release: str | None = None) -> Line:
        """kb's options an SGLang launch line names (kb's own, when given, win) and its ServerArgs fields, read with
        `release`'s flag table."""
        from kbtool.solve.engines.sglang.args import parse

        line = parse(text, release)
        f = line.fields
        kv = f.get("kv_cache_dtype")
        options = {
            "model": line.model, "ctx": str(f["context_length"]) if f.get("context_length") else None,
            "kv": None if kv in (None, "auto") else KV_OF.get(str(kv), str(kv)), "gpus": f.get("tp_size"),
            "kv_pasted": kv,  # as typed, "auto" included (a conflict with kb's --kv is refused)
            "dtype": f["dtype"] if f.get("dtype") not in (None, "auto") else None,
            "gpus_flag": getattr(line, "spelled", {}).get("tp_size"),
        }
        return Line(self.name, options, dict(f), list(line.unknown), line.read_with, tuple(line.refused))

    def line_reader(self, release: str | None) -> str | None:
        from kbtool.solve.engines.flags import reads_with

        return reads_with(self.name, release)

    def gpus_per_replica(self, q: Query) -> int:
        """--tp-size x --pp-size (the pool itself is not sized per stage: --pp-size is in memory_flags)."""
        return q.gpus * int(q.settings.get("pp_size") or 1)

    def apply_line(self, q: Query, line: Line) -> None:
        q.settings, q.ignored = dict(line.settings), list(line.ignored)
        if int(q.settings.get("pp_size") or 1) > 1:  # read, but kb's pool is one stage's of every layer
            q.ignored.append("--pp-size")
        from kbtool.solve.engines.sglang.args import attn_dp

        width = attn_dp(q.settings)
        if width > 1:
            _check_attn_dp(q.settings, width)
            deprecated = int(q.settings.get("attn_dp_size") or 1) == 1  # --dp-size N --enable-dp-attention
            q.ignored.append("--enable-dp-attention" if deprecated else ATTN_DP)

    def pin_release(self, img: Image, q: Query) -> None:
        """--engine sglang: the release is --sglang, else --lib sglang=X, else the newest recorded. A release
        without a recorded resolution is answered by the recorded ones around it (unrecorded.py, conditional);
        a value that is not a release number is a usage error naming the recorded ones."""
        from kbtool.solve.conditions import is_release
        from kbtool.solve.engines.sglang import resolve as sglang_resolve

        known = sglang_resolve.releases(img)
        asked = q.release or q.libs.get("sglang")
        if asked is not None and asked not in known and not is_release(asked):
            from kbtool.errors import UsageError

            flag = f"--sglang {asked}" if q.release else f"--lib sglang={asked}"
            raise UsageError(f"{flag}: not a release number (the KB records SGLang's resolution for "
                             f"{', '.join(known) or 'no release'})",
                             fix=f"e.g. --sglang {known[-1]} (the newest recorded)" if known else "leave out --sglang")
        q.release = asked or (known[-1] if known else None)
        if q.release:
            q.libs["sglang"] = q.release

    def recorded(self, img: Image, release: str | None) -> bool:
        """Whether the KB records SGLang's resolution for `release`."""
        from kbtool.solve.engines.sglang import resolve as sglang_resolve

        return release is not None and release in sglang_resolve.releases(img)

    def section(self, by_kind: dict[str, list[Any]]) -> Any:
        from kbtool.solve.engines.sglang.records import section

        return section(by_kind)

    def backend_outcome(self, cx: Ctx, backend: BackendV, env: dict[str, Any]) -> Outcome | None:
        """What SGLang does when asked for this backend (--attention-backend NAME): its resolution, with its own
        error where it refuses; a backend it switches away from is a caveat naming what runs instead."""
        from kbtool.solve.engines.sglang import facts as sglang_facts
        from kbtool.solve.engines.sglang import resolve as sglang_resolve
        from kbtool.solve.gates import Outcome, structural
        from kbtool.solve.parts import Reason

        q = cx.q
        if q.release is None or not env.get("gpu"):
            return None
        if not self.recorded(cx.img, q.release):  # its claims are checks inside a resolution kb does not have
            return Outcome(status="unknown", reasons=[structural(
                "NOT_RECORDED", f"SGLang {q.release} is not recorded: kb does not resolve its backends (the recorded "
                "releases around it are on the SGLang line)", "engine", subject=backend.id)])
        if not _registered(cx.img, backend, q.release):
            return Outcome(status="rejected", reasons=[structural(
                "NOT_REGISTERED", f"SGLang {q.release} does not register {backend.backend_name}", "engine",
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
            r = cx.engine_cache[key] = sglang_resolve.resolve(cx.img, q.release, platform, facts, args)
        if r.get("error"):
            claim = next((c for c in cx.img.claims(backend.id) if c.id == r.get("claim")), None)
            if claim is None:
                claim = next((c for a in cx.img.backends("sglang") for c in cx.img.claims(a.id)
                              if c.id == r.get("claim")), None)
            return Outcome(status="rejected", reasons=[Reason(
                claim=r.get("claim") or "", code=claim.code if claim is not None else "ENGINE_ERROR",
                message=f"SGLang {q.release}: {r['error']}: {r['message']}", verification=claim.status
                if claim is not None else "structural", layer="engine", subject=backend.id)])
        runs = {r.get("prefill"), r.get("decode")}
        if backend.backend_name not in runs:
            return Outcome(status="caveat", caveats=[structural(
                "ENGINE_SWITCHES", f"asked for {backend.backend_name}, SGLang {q.release} runs prefill "
                f"{r.get('prefill')}, decode {r.get('decode')} ({', '.join(sorted((r.get('by') or {}).values()))})",
                "engine", subject=backend.id)])
        return Outcome()

    def resolution(self, cx: Ctx, acc: AcceleratorV, env: dict[str, Any],
                   release: str | None = None) -> dict[str, Any]:
        """SGLang's own resolution for this accelerator (once per accelerator, release and query); `release`: a
        recorded release other than the query's (the neighbours of an unrecorded one, unrecorded.py)."""
        from kbtool.solve.engines.sglang import facts as sglang_facts
        from kbtool.solve.engines.sglang import resolve as sglang_resolve

        rel = release or cx.q.release or ""
        key = f"sglang:{acc.id}:{rel}"
        got: dict[str, Any] | None = cx.engine_cache.get(key)
        if got is None:
            facts = sglang_facts.model_facts_from_record(cx.model) if cx.model is not None else {}
            platform = sglang_facts.platform_facts(acc, env.get("cc"), env.get("cuda") or cx.img.cuda)
            got = sglang_resolve.resolve(cx.img, rel, platform, facts, args_for(cx.q, cx.model))
            cx.engine_cache[key] = got
        return got

    def priority(self, cx: Ctx, env: dict[str, Any]) -> list[str]:
        """The backends SGLang resolved, prefill first (its engine-backend ids)."""
        acc = cx.img.accelerator(env["gpu"]) if env.get("gpu") else None
        if acc is None or not self.recorded(cx.img, cx.q.release):
            return []
        r = self.resolution(cx, acc, env)
        return [f"sglang-{b}" for b in dict.fromkeys((r.get("prefill"), r.get("decode"))) if b]

    def recorded_releases(self, img: Image) -> list[str]:
        from kbtool.solve.engines.sglang import releasediff

        return releasediff.recorded()

    def missing_release(self, img: Image, release: str) -> tuple[str, str] | None:
        """SGLang's probes are judged on kb's resolution of the release (resolve.py), which runs the steps of its
        engine-priority record: without one the release cannot be judged."""
        from kbtool.solve.engines.sglang import resolve as sglang_resolve

        known = sglang_resolve.releases(img)
        if release in known:
            return None
        from kbtool.solve.conditions import compare_versions

        older = [v for v in known if compare_versions(v, release) < 0]  # known is oldest first
        near = older[-1] if older else (known[0] if known else None)
        return (f"no engine-priority record for SGLang {release} (records/engine-priorities/sglang-{release}-cuda.yaml "
                f"and -rocm.yaml; recorded: {', '.join(known) or 'none'})",
                (f"copy sglang-{near}-cuda.yaml and -rocm.yaml to sglang-{release}-*, set their scope to {release}, "
                 if near else f"write sglang-{release}-cuda.yaml and -rocm.yaml, ")
                + f"check each step and source line against the v{release} wheel, and replay the grid "
                  f"(tests/solve/test_sglang_resolve.py with {release} in RELEASES); CONTRIBUTING.md, "
                  "\"Engine probes (no GPU): sglang-resolve\"")

    def release_changes(self, img: Image, a: str, b: str) -> list[ReleaseChange]:
        from kbtool.solve.engines.sglang import releasediff

        return releasediff.release_changes(a, b)

    def memory(self, cx: Ctx, acc: AcceleratorV, env: dict[str, Any], assumed: dict[str, Any]) -> Memory | None:
        from kbtool.solve.engines.sglang.pool import memory_for

        if cx.q.release is not None and not self.recorded(cx.img, cx.q.release):
            if cx.model is not None:  # the pools of the releases around it are in the engine's line (pick)
                cx.notes.append(f"SGLang {cx.q.release} is not recorded: its pool is not sized (the recorded "
                                "releases around it, each with its own pool, are on the SGLang line)")
            return None
        return memory_for(self, cx, acc, env, assumed)

    def pick(self, cx: Ctx, acc: AcceleratorV, envs: dict[str, dict[str, Any]], assumed: dict[str, Any],
             memory: Memory | None, backends: list[BackendAnswer], kernels: list[KernelAnswer]) -> Pick | None:
        q = cx.q
        if q.release is None:
            return None
        env = envs.get("decode") or next(iter(envs.values()))
        if not self.recorded(cx.img, q.release):  # the recorded releases around it, each with its own answer
            from kbtool.solve.engines.sglang import resolve as sglang_resolve
            from kbtool.solve.engines.sglang import unrecorded

            text = unrecorded.between(self, cx, acc, env, q.release, sglang_resolve.releases(cx.img))
            own: dict[str, Any] = {"engine": self.name, "sglang": q.release, "between": text,
                                   "source": unrecorded.fix(q.release),
                                   "preflight": f"SGLang {q.release} is not recorded: {text}"}
            return Pick(state="not_recorded", engine=self.name, label=f"SGLang {q.release}", release=q.release,
                        between=text, source=unrecorded.fix(q.release), block=own)
        r = self.resolution(cx, acc, env)
        report = memory.engine_report if memory is not None else None
        block = block_of(r, q.release, report)
        label = f"SGLang {q.release}"
        common: dict[str, Any] = {"engine": self.name, "label": label, "release": q.release}
        if r.get("error"):
            block["details"] = [("raised at: ", f"{r.get('where')} (claim {r.get('claim')})")]
            block["preflight"] = f"{r['error']}: {r['message']}"
            return Pick(state="error", error=r["message"], error_type=r["error"], block=block, **common)
        by = r.get("by") or {}
        block["details"] = details(block)
        if not r.get("prefill") or not r.get("decode"):  # it chooses by the model's architecture
            return Pick(state="depends", error="depends on inputs not given: the model (give --model)",
                        page_size=r.get("page_size"), page_size_by=by.get("page_size"), block=block, **common)
        block["preflight"] = preflight(block)
        return Pick(state="selected", selected=block["selected"], prefill=r.get("prefill"), decode=r.get("decode"),
                    page_size=r.get("page_size"), page_size_by=by.get("page_size"),
                    kv_cache_dtype=r.get("kv_cache_dtype"), block=block, **common)


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


def details(e: dict[str, Any]) -> list[tuple[str, str]]:
    """The explain view's detail lines: what forced each setting, DSA's sub-backends, the memory settings."""
    by = e.get("forced_by") or {}
    out = [("set by: ", ", ".join(f"{k} <- {v}" for k, v in sorted(by.items())))] if by else []
    if e.get("dsa_prefill_backend"):
        out.append(("DSA: ", f"prefill {e['dsa_prefill_backend']}, decode {e.get('dsa_decode_backend')}"))
    if e.get("mem_fraction_static") is not None:
        out.append(("memory: ", f"mem_fraction_static {e['mem_fraction_static']}, chunked_prefill_size "
                                f"{e.get('chunked_prefill_size')}, decode CUDA-graph max bs "
                                f"{e.get('decode_graph_max_bs')}"))
    return out


def preflight(block: dict[str, Any]) -> str:
    """What SGLang would log at start-up for this line: its backends, then its KV pool line."""
    text = f"attention backend: prefill {block['prefill']}, decode {block['decode']}; page_size {block['page_size']}"
    pool = block.get("pool")
    if pool and pool.get("error"):
        text += f"; {pool['error']}"
    elif pool and pool.get("kv_line"):
        text += f"; {pool['kv_line']}; max_total_num_tokens={pool['max_total_num_tokens']}, " \
                f"max_running_requests={pool['max_running_requests']}"
    return text

