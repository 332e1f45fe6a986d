"""vLLM's serving defaults for one release on one GPU, replayed from its engine-release record
(records/engine-releases/vllm-X.yaml, compiled into vLLM's section of the query image by records.py).

What `vllm serve` resolves where the user gives no flag: max_num_batched_tokens and max_num_seqs per device
(vllm/engine/arg_utils.py get_batch_defaults: by total memory and device name, then
_set_default_max_num_seqs_and_batched_tokens_args caps them by max_model_len), the block size, the memory
utilization, async scheduling, prefix caching and the hybrid models' state-cache mode, the model runner and the
largest CUDA-graph capture size (vllm/config/vllm.py). tests/solve/engines/vllm/test_engine_release.py holds this
replay to every point the vllm-engine-config probe recorded.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.image import Image

GIB = 1 << 30
FIELDS = ("block_size", "gpu_memory_utilization", "async_scheduling", "chunked_prefill", "prefix_caching",
          "hybrid_prefix_caching", "hybrid_state_cache", "hybrid_block_at_config", "model_runner",
          "model_runner_v2_architectures", "model_runner_v2_dense", "model_runner_v2_listed_unquantized",
          "cudagraph_mode",
          "cudagraph_capture_ceiling", "cudagraph_capture_ceiling_sm100", "cudagraph_prefill_capture_sm100",
          "cudagraph_capture_by_architecture",
          "kv_cache_dtype_auto",
          "extensible_kv_cache")


class Defaults:
    """One release's defaults on one device. `release`: the record's release; `asked`: the release asked for
    (a release without a record takes the newest recorded at or below it, and `borrowed` says so)."""

    __slots__ = (
        "asked",
        "async_scheduling",
        "batch_source",
        "block_size",
        "capture_max",
        "chunked_prefill",
        "cudagraph_mode",
        "extensible_kv_cache",
        "hybrid_block_at_config",
        "hybrid_prefix_caching",
        "hybrid_state_cache",
        "kv_cache_dtype_auto",
        "margins",
        "max_num_batched_tokens",
        "max_num_seqs",
        "model_runner",
        "prefix_caching",
        "release",
        "sources",
        "utilization",
        "v2_architectures",
        "v2_dense",
        "v2_listed_unquantized",
    )

    def __init__(self, release: str, asked: str, row: dict[str, Any], tokens: int, seqs: int, batch_source: str,
                 capture_max: int) -> None:
        d = row["defaults"]
        self.release, self.asked = release, asked
        self.max_num_batched_tokens, self.max_num_seqs, self.batch_source = tokens, seqs, batch_source
        self.block_size = int(d["block_size"][0])
        self.utilization = float(d["gpu_memory_utilization"][0])
        self.async_scheduling = bool(d["async_scheduling"][0])
        self.chunked_prefill = bool(d["chunked_prefill"][0])
        self.prefix_caching = bool(d["prefix_caching"][0])
        self.hybrid_prefix_caching = bool(d["hybrid_prefix_caching"][0])
        self.hybrid_state_cache = str(d["hybrid_state_cache"][0])
        self.model_runner = str(d["model_runner"][0])
        self.hybrid_block_at_config = bool((d.get("hybrid_block_at_config") or (False, ""))[0])
        self.v2_architectures = frozenset((d.get("model_runner_v2_architectures") or ([], ""))[0])
        self.v2_dense = bool((d.get("model_runner_v2_dense") or (False, ""))[0])
        self.v2_listed_unquantized = bool((d.get("model_runner_v2_listed_unquantized") or (False, ""))[0])
        self.cudagraph_mode = str(d["cudagraph_mode"][0])
        self.kv_cache_dtype_auto = str(d["kv_cache_dtype_auto"][0])
        self.extensible_kv_cache = bool(d["extensible_kv_cache"][0])
        self.capture_max = capture_max
        self.margins: dict[str, Any] | None = row.get("margins")
        self.sources: dict[str, str] = {k: v[1] for k, v in d.items() if v is not None}

    @property
    def borrowed(self) -> bool:
        return self.release != self.asked

    def runner(self, model: Any) -> str:
        """'V1' or 'V2': the model runner this release uses for the model by default (its architecture; where the
        release says so, V2 for models that are neither MoE nor hybrid; in 0.23.0 a listed architecture only where
        the model is neither MoE nor quantized)."""
        if getattr(model, "architecture", None) in self.v2_architectures:
            if self.v2_listed_unquantized and (getattr(model, "experts", None) or getattr(model, "quantized", None)
                                               or getattr(model, "weight_dtype", "bf16") not in ("bf16", "fp16",
                                                                                                  "fp32")):
                return self.model_runner
            return "V2"
        if self.v2_dense and not getattr(model, "experts", None) and not any(
                g.type == "linear" for g in model.layers):
            return "V2"
        return self.model_runner

    def in_flight(self, pp: int = 1) -> int:
        """Batches a request may have scheduled at once: pp + 1 with async scheduling (vllm/config/vllm.py), else
        pp."""
        return pp + 1 if self.async_scheduling else pp


def rows(img: Image) -> dict[str, dict[str, Any]]:
    data = img.engine_data("vllm") or {}
    return data.get("releases") or {}


def record_for(img: Image, release: str | None) -> tuple[str, dict[str, Any]] | None:
    """The engine-release row of `release`: its own, else the newest recorded at or below it, else the oldest;
    None where no vLLM release is recorded. No release: the newest recorded."""
    from kbtool.solve.conditions import compare_versions, version_key

    got = rows(img)
    if not got:
        return None

    order = sorted(got, key=version_key)
    if release is None:
        return order[-1], got[order[-1]]
    below = [r for r in order if compare_versions(r, release) <= 0]
    pick = below[-1] if below else order[0]
    return pick, got[pick]


def batch_tier(row: dict[str, Any], memory_bytes: int, device_name: str, cc: str) -> tuple[int, int, str]:
    """(max_num_batched_tokens, max_num_seqs, source) of the first tier that holds for this device."""
    _, _, _, tokens, seqs, src = row["batch"][tier_index(row, memory_bytes, device_name, cc)]
    return int(tokens), int(seqs), src


def tier_index(row: dict[str, Any], memory_bytes: int, device_name: str, cc: str) -> int:
    """Which of the row's batch tiers holds for this device: the first whose conditions hold."""
    name = device_name.lower()
    for i, (min_gib, not_names, not_cc, _tokens, _seqs, _src) in enumerate(row["batch"]):
        if min_gib is not None and memory_bytes < min_gib * GIB:
            continue
        if any(n in name for n in not_names) or cc in not_cc:
            continue
        return i
    raise ValueError(f"engine-release vllm-{row['release']}: no batch tier holds (the last must have no condition)")


def serve_defaults(img: Image, release: str | None, memory_bytes: int, device_name: str, cc: str,
                   max_model_len: int | None = None, architecture: str | None = None,
                   max_num_seqs: int | None = None) -> Defaults | None:
    """`vllm serve`'s defaults of `release` on a device of `memory_bytes`, `device_name` and compute capability
    `cc`, capped as vLLM caps them for `max_model_len` (arg_utils.py: tokens <= max_num_seqs x max_model_len, with
    the serve line's `max_num_seqs` where it sets one; max_num_seqs <= tokens)."""
    found = record_for(img, release)
    if found is None:
        return None
    rel, row = found
    return of_row(row, rel, release or rel, memory_bytes, device_name, cc, max_model_len, architecture, max_num_seqs)


def of_row(row: dict[str, Any], release: str, asked: str, memory_bytes: int, device_name: str, cc: str,
           max_model_len: int | None = None, architecture: str | None = None,
           max_num_seqs: int | None = None) -> Defaults:
    """The defaults one engine-release row (records.releases) resolves on one device: what `serve_defaults` returns
    once it has picked the row (a drafted record is replayed through here before it is written: draft.py)."""
    tokens, seqs, src = batch_tier(row, memory_bytes, device_name, cc)
    if max_model_len:
        tokens = min((max_num_seqs or seqs) * max_model_len, tokens)
    seqs = min(seqs, tokens)
    return Defaults(release, asked, row, tokens, seqs, src, capture_max(row["defaults"], tokens, seqs, cc,
                                                                        architecture))


def startup_refusal(img: Image, release: str | None, memory_bytes: int, device_name: str, cc: str,
                    max_num_seqs: int | None, max_num_batched_tokens: int | None) -> dict[str, str] | None:
    """The first start-up check of `release` (its engine-release record's `startup_checks`, or the nearest
    recorded at or below it) that the serve line's settings fail, as {raises, message, source, release}; None where
    each passes. Only a line that sets --max-num-seqs can fail "max_num_batched_tokens>=max_num_seqs": left out,
    vLLM caps max_num_seqs at max_num_batched_tokens (arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args);
    and a default max_num_batched_tokens min(max_num_seqs x max_model_len, the tier's) is below max_num_seqs only
    where the tier's is, so the tier's is the value vLLM's message prints."""
    found = record_for(img, release)
    if found is None or max_num_seqs is None:
        return None
    rel, row = found
    tokens = max_num_batched_tokens or batch_tier(row, memory_bytes, device_name, cc)[0]
    for check, raises, message, source in row.get("checks") or ():
        if check == "max_num_batched_tokens>=max_num_seqs" and tokens < max_num_seqs:
            return {"raises": raises, "message": message.format(max_num_batched_tokens=tokens,
                                                                 max_num_seqs=max_num_seqs),
                    "source": source, "release": rel}
    return None


def capture_max(d: dict[str, Any], tokens: int, seqs: int, cc: str, architecture: str | None) -> int:
    """The largest CUDA-graph capture size vLLM resolves (vllm/config/vllm.py): decode graphs up to
    min(max_num_seqs x 2, the ceiling), a model's own ceiling where its config sets one, capped by
    max_num_batched_tokens; on cc 10.x, where the release records one, prefill graphs up to that many tokens."""
    sm100 = cc.split(".")[0] == "10"
    ceiling = d["cudagraph_capture_ceiling"][0]
    if sm100 and d.get("cudagraph_capture_ceiling_sm100"):
        ceiling = d["cudagraph_capture_ceiling_sm100"][0]
    capture = min(tokens, seqs * 2, int(ceiling))
    prefill = (d.get("cudagraph_prefill_capture_sm100") or (None, ""))[0] if sm100 else None
    own: dict[str, int] = (d.get("cudagraph_capture_by_architecture") or ({}, ""))[0]
    if architecture in own and prefill is None:  # the model's config sets the ceiling itself (models/config.py)
        capture = min(tokens, int(own[architecture]))
    if prefill is not None:
        capture = max(capture, min(int(prefill), tokens))
    return capture


def device_name(img: Image, accelerator: str) -> str:
    """The device name vLLM reads (the accelerator record's first device name, else its name)."""
    return str(((img.engine_data("vllm") or {}).get("device_names") or {}).get(accelerator) or accelerator)


def gib(memory_bytes: int) -> str:
    return f"{memory_bytes / GIB:.1f} GiB"


def auto_dtype(checkpoint: str | None, cc: str | None) -> str:
    """The dtype `--dtype auto` loads a checkpoint in, which `--kv-cache-dtype auto` then stores: fp32 checkpoints
    are downcast to bf16, and bf16 becomes fp16 where the GPU has no bf16 (cc < 8.0) (vllm/config/model.py,
    _get_and_verify_dtype)."""
    dtype = checkpoint if checkpoint in ("bf16", "fp16", "fp32") else "bf16"
    no_bf16 = cc is not None and float(cc) < 8.0
    if dtype == "fp32":
        dtype = "bf16"
    return "fp16" if dtype == "bf16" and no_bf16 else dtype


def accelerator_facts(img: Image, accelerator: str) -> tuple[int | None, str, str | None]:
    """(total memory bytes, device name, compute capability) of an accelerator, as vLLM reads them."""
    acc = img.accelerator(accelerator)
    return acc.capacity_bytes(), device_name(img, accelerator), img.cc.get(acc.architecture)
