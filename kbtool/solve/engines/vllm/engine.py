"""vLLM behind the engine contract (kbtool/solve/engines/base.py): its options, its serve line (args.py), its release
pinning, priority lists and selection (selection.py, from its engine-priority and backend claim records), its
memory accounting (memory.py), its default block size and the kernel caveats it handles by default.

Only the contract is imported here at import time: the registry loads this module on every query."""

from __future__ import annotations

from kbtool.solve.engines.base import Engine
from kbtool.solve.engines.results import Line, Option, Pick, ReleaseChange

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from kbtool.kb import KB
    from kbtool.solve.context import Ctx
    from kbtool.solve.engines.drafts import ReleaseDraft
    from kbtool.solve.gates import Outcome
    from kbtool.solve.image import AcceleratorV, BackendV, Image
    from kbtool.solve.parts import BackendAnswer, KernelAnswer, Memory
    from kbtool.solve.query import Query

class Vllm(Engine):
    name = "vllm"
    label = "vLLM"
    options = (
        Option("--vllm", "release", "VERSION", "vLLM release for --engine vllm (default: the newest recorded)."),
        Option("--vllm-args", "line", "CMD", 'A vLLM serve command, e.g. "serve MODEL --kv-cache-dtype fp8 -tp 2": '
               "pre-flight answer (backend, KV fit, or vLLM's error)."),
    )
    block_size = 16  # where no engine-release record is found; default_block_size reads the release's record
    long_context = "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which vLLM warns against"  # vllm/config/model.py
    # flags whose GPU memory kb does not model, named by what each flag is for; they only make an answer
    # conditional (no number rests on them). Not yet read against vllm/engine/arg_utils.py for a release.
    # --speculative-config is read (spec.py): an MTP draft the release's record covers is sized, any other draft
    # makes the answer conditional through unmodelled_memory.
    memory_flags = {"--cpu-offload-gb": "weights offloaded to host memory", "--enable-lora": "LoRA adapter weights",
                    "--num-gpu-blocks-override": "the KV pool's size",
                    "--kv-transfer-config": "a KV connector's buffers: LMCache, NIXL, offloading",
                    # 0.33.0 engine/arg_utils.py:1453 and 2330: the size becomes an offloading kv_transfer_config
                    "--kv-offloading-size": "a CPU offloading connector's buffers"}
    # vLLM's draft-model flag before --speculative-config took it over: the server form of speculative_model in the
    # v0.6.4 docs (https://docs.vllm.ai/en/v0.6.4/_sources/models/spec_decode.rst, "Speculating with a draft model");
    # the v0.8.2 page gives speculative_config={"model": ...} instead, and no recorded release (0.19.1 on) has it
    retired_memory_flags = {"--speculative-model": "a draft model and its KV cache; --speculative-config "
                            "replaced the flag"}
    boot_probe = "vllm-boot"  # probes/vllm_boot
    boot_error_record = "vllm-boot-estimate-error"  # boots.RECORD_ID, written by kbtool/probe/boot_error.py

    def unmodelled_memory(self, cx: Ctx) -> dict[str, str]:
        """Data parallel on an MoE model: kb shards the experts' weights over every GPU of the replicas as vLLM does
        (budget.fit), but not the MoE layers' activations, whose tokens vLLM gathers from every data-parallel rank
        before the experts run (0.34.0's default all2all_backend allgather_reducescatter, config/parallel.py:229,
        takes AgRsAll2AllManager at distributed/device_communicators/cuda_communicator.py:213-217, whose dispatch
        all-gathers the hidden states and router logits, all2all.py:104-109); a dense model's replicas are
        independent and sized as shown."""
        out = {}
        if cx.q.engine == self.name and cx.q.settings.get("speculative") is not None:
            from kbtool.solve.engines.vllm import spec
            from kbtool.solve.engines.vllm.defaults import record_for

            found = record_for(cx.img, cx.q.release)
            rows = {found[0]: found[1]} if found else {}
            why = spec.draft(cx.q.settings, cx.model, found[0] if found else None, rows)[1]
            if why:
                out[spec.FLAG] = why
        dp = int(cx.q.settings.get("dp") or 1) if cx.q.engine == self.name else 1
        if dp > 1 and cx.model is not None and getattr(cx.model, "experts", None):
            out["--data-parallel-size"] = ("the MoE layers' activations over the tokens gathered from every "
                                           "data-parallel rank; kb shards the experts' weights as vLLM does")
        return out

    def default_block_size(self, img: Image, q: Query) -> int | None:
        """The asked release's CacheConfig.DEFAULT_BLOCK_SIZE (16 up to 0.33.0, 64 in 0.34.0), from its
        engine-release record."""
        from kbtool.solve.engines.vllm.defaults import record_for

        found = record_for(img, q.release)
        return int(found[1]["defaults"]["block_size"][0]) if found else self.block_size

    def gpus_per_replica(self, q: Query) -> int:
        """--tensor-parallel-size x --pipeline-parallel-size: each stage holds its share of the layers on its own
        GPUs (the memory answer sizes one GPU of one stage, budget.fit)."""
        return q.gpus * int(q.settings.get("pp") or 1)

    def parse_line(self, text: str, release: str | None = None) -> Line:
        """kb's options a `vllm serve` line names (kb's own, when given, win) and its vLLM-only settings, read with
        `release`'s flag table."""
        from kbtool.solve.engines.vllm.args import QUANT_WEIGHTS, parse
        from kbtool.solve.engines.vllm.spec import read as spec_read

        serve = parse(text, release)
        weights = None
        if serve.quantization:
            weights = QUANT_WEIGHTS.get(serve.quantization.lower())
            if weights is None:
                serve.ignored.append(f"--quantization {serve.quantization} (weights sized as the checkpoint says)")
        options = {
            "model": serve.model,  # an id, alias, config path or Hugging Face id (kbtool/solve/modelref.py)
            "ctx": str(serve.max_model_len) if serve.max_model_len and serve.max_model_len > 0 else None,
            "kv": serve.kv_cache_dtype if serve.kv_cache_dtype and serve.kv_cache_dtype != "auto" else None,
            "kv_pasted": serve.kv_cache_dtype,  # as typed, "auto" included (a conflict with kb's --kv is refused)
            "gpus": serve.tp, "util": serve.gpu_memory_utilization, "block_size": serve.block_size,
            "dtype": serve.dtype if serve.dtype and serve.dtype != "auto" else None,
            "max_num_batched_tokens": serve.max_num_batched_tokens, "weights": weights,
            "gpus_flag": serve.spelled.get("tp"),
        }
        settings: dict[str, Any] = {
            "attention_backend": serve.attention_backend, "kv_cache_dtype": serve.kv_cache_dtype,
            "max_num_seqs": serve.max_num_seqs, "kv_cache_memory": serve.kv_cache_memory,
            "enforce_eager": serve.enforce_eager or None, "ctx_auto": (serve.max_model_len == -1) or None,
            "pp": serve.pp if serve.pp and serve.pp > 1 else None,
            "dp": serve.dp if serve.dp and serve.dp > 1 else None,
            "language_model_only": serve.language_model_only or None,
            "enable_mm_embeds": serve.enable_mm_embeds or None, "limit_mm_per_prompt": serve.limit_mm_per_prompt,
            "skip_mm_profiling": serve.skip_mm_profiling or None,
            "prefix_caching": serve.enable_prefix_caching, "model_runner": serve.model_runner,
            "speculative": spec_read(serve.speculative_config),
        }
        return Line(self.name, options, {k: v for k, v in settings.items() if v is not None}, serve.ignored,
                    serve.read_with, tuple(serve.refused))

    def line_reader(self, release: str | None) -> str | None:
        from kbtool.solve.engines.flags import reads_with

        return reads_with(self.name, release)

    def apply_line(self, q: Query, line: Line) -> None:
        q.settings, q.ignored = dict(line.settings), list(line.ignored)
        if q.ctx is not None:  # --max-model-len auto fits the context to memory only where none was given
            q.settings.pop("ctx_auto", None)

    def pin_release(self, img: Image, q: Query) -> None:
        from kbtool.solve.engines.vllm import selection

        selection.pin_release(img, q)

    def priority(self, cx: Ctx, env: dict[str, Any]) -> list[str]:
        from kbtool.solve.engines.vllm import selection

        version = cx.q.release or cx.q.libs.get("vllm") or selection.default_version(cx.img)
        return selection.priority_order(cx.img, env, version, selection.platform_of(env)) if version else []

    def backend_outcome(self, cx: Ctx, backend: BackendV, env: dict[str, Any]) -> Outcome | None:
        return None  # kb applies each backend's claims for the pinned release (selection.py)

    def section(self, by_kind: dict[str, list[Any]]) -> Any:
        from kbtool.solve.engines.vllm.records import section

        return section(by_kind)


    def recorded_releases(self, img: Image) -> list[str]:
        from kbtool.solve.engines.vllm import releasediff

        return releasediff.recorded()

    def missing_release(self, img: Image, release: str) -> tuple[str, str] | None:
        """vLLM's probes are judged on its selection for the release: from the release's engine-priority record,
        else its own recorded selector grid (grid.py select_unrecorded); with neither there is nothing to judge on."""
        from kbtool.solve.engines.vllm import grid
        from kbtool.solve.engines.vllm.selected import versions

        if release in versions(img) or release in grid.recorded():
            return None
        return (f"no engine-priority record for vLLM {release} (records/engine-priorities/vllm-{release}-cuda-"
                f"priorities.yaml) and no recorded selector grid (tests/data/vllm/{release}/cc*.json.gz)",
                f"run `kb probe sweep --lib vllm --releases {release}` (its vllm-selector probe records the grid), or "
                f"write vllm-{release}-cuda-priorities.yaml from vLLM's source at v{release}")

    def draft_release(self, kb: KB, img: Image, records: Path, root: Path, release: str) -> ReleaseDraft | None:
        from kbtool.solve.engines.vllm import draft

        return draft.draft(kb, img, records, root, release)

    def release_changes(self, img: Image, a: str, b: str) -> list[ReleaseChange]:
        from kbtool.solve.engines.vllm import releasediff

        return releasediff.release_changes(a, b)

    def memory(self, cx: Ctx, acc: AcceleratorV, env: dict[str, Any], assumed: dict[str, Any]) -> Memory | None:
        from kbtool.solve.engines.vllm.memory import memory_for

        return memory_for(cx, acc, env, assumed, cx.q.release if cx.q.engine == self.name else None)

    def pick(self, cx: Ctx, acc: AcceleratorV, envs: dict[str, dict[str, Any]], assumed: dict[str, Any],
             memory: Memory | None, backends: list[BackendAnswer], kernels: list[KernelAnswer]) -> Pick | None:
        from kbtool.solve.engines.vllm import defaults as vd
        from kbtool.solve.engines.vllm import selection

        block = selection.block_for(cx, envs, assumed, memory)
        if block is None:
            return None
        mem, name, cc = vd.accelerator_facts(cx.img, acc.id)
        refused = vd.startup_refusal(cx.img, cx.q.release, mem or acc.capacity_bytes() or 0, name, cc or "0.0",
                                     cx.q.settings.get("max_num_seqs"), cx.q.batched_tokens)
        if refused is not None:  # it stops while building its config, before it picks a backend
            block.update(selected=None, error=refused["message"], error_type=refused["raises"],
                         preflight=f"{refused['raises']}: {refused['message']}",
                         details=[("raised at: ", f"{refused['source']} (vLLM {refused['release']}'s engine-release "
                                                  "record, startup_checks)")])
            return Pick(state="error", error=refused["message"], error_type=refused["raises"], engine="vllm",
                        label=f"vLLM {block['vllm']}", release=block["vllm"], block=block)
        block["details"] = details(block)
        return pick_of(block)


def pick_of(e: dict[str, Any]) -> Pick:
    """vLLM's selection block as a Pick: the backend per phase (the MLA prefill path for prefill), the refusals
    ahead of its choice in its priority order, its error, or the releases around an unrecorded one."""
    label = f"vLLM {e['vllm']}"
    common: dict[str, Any] = {"engine": "vllm", "label": label, "release": e["vllm"], "block": e}
    if e.get("between"):
        return Pick(state="not_recorded", between=e["between"], source=e.get("source"), **common)
    if not e.get("selected"):
        state = "depends" if str(e["error"]).startswith("depends on ") else "error"  # inputs, use_mm_prefix
        return Pick(state=state, error=e["error"], error_type="ValueError", **common)
    names = {b["id"]: b["name"] for b in e["backends"]}
    decode = names.get(e["selected"], e["selected"])
    mla = e.get("mla")
    prefill = decode
    if mla:
        prefill = str(mla["prefill"][0]) if mla["prefill"] else "MLA prefill path not recorded"
    ids = [b["id"] for b in e["backends"]]  # vLLM's priority order: the refusals that matter come first
    ahead = e["backends"][:ids.index(e["selected"])] if e["selected"] in ids else e["backends"]
    first = [b for b in ahead if b["status"] == "rejected"][:2]
    refused = [(b["name"], b["reasons"][0].split(" (")[0]) for b in first if b["reasons"]]
    note = None
    if mla:
        note = mla["prefill_shape"] if mla["prefill"] else f"MLA prefill order not recorded for {e['vllm']}"
    return Pick(state="selected", selected=e["selected"], prefill=prefill, decode=decode, refused=refused,
                prefill_note=note, source=e.get("source"), **common)


def details(e: dict[str, Any]) -> list[tuple[str, str]]:
    """The explain view's detail lines for an MLA selection: decode, the prefill order and shape, the KV layout."""
    mla = e.get("mla")
    if not mla:
        return []
    order = " > ".join(mla["prefill"]) or mla.get("prefill_unrecorded", "not recorded")
    out = [("MLA: ", f"decode {mla['decode']}; prefill {order} ({mla['prefill_shape']}); KV {mla['kv_layout']}")]
    if mla.get("prefill_source"):
        out.append(("", f"prefill order: {mla['prefill_source']}"))
    if mla.get("prefill_refused"):
        out.append(("", "prefill refused by default: " + "; ".join(mla["prefill_refused"])))
    if mla.get("indexer"):
        out.append(("", mla["indexer"]))
    return out
