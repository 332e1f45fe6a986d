"""How each vLLM release plans its KV cache from the memory left for it, and its start-up check: kb's replay of vLLM's
own planning, held to the vllm-kv-planning probe's recordings at every point (tests/solve/test_vllm_planning.py).

What differs between releases is each release's engine-release record (records/engine-releases/vllm-X.yaml,
`planning:`, each value citing the release's code, and `defaults.hybrid_prefix_caching`); this module is how those
values are used. Given the KV cache groups (pool.groups) and the bytes available on one rank (paths under vllm/ in
the release's wheel; the records cite each release's own lines):

- bytes per block: the largest group's pages, page x layers per group (v1/core/kv_cache_utils.py
  `_pool_bytes_per_block`, later v1/core/kv_cache_planning.py `_get_kv_cache_bytes_per_block`); num_blocks =
  available // bytes per block.
- blocks a request of max_model_len holds, summed over groups (a cdiv per group): full attention and MLA
  cdiv(len, block); sliding window cdiv(min(window - 1 + in-flight tokens, len), block) + 1; chunked local
  attention cdiv(min(chunk + in-flight tokens, len), block) (v1/kv_cache_interface.py SlidingWindowSpec /
  ChunkedLocalAttentionSpec max_admission_blocks_per_request); a Mamba layer's state pages: 1 in mode "none", 2 in
  mode "align" (prefix caching on), plus the prefill checkpoint pages where the release has them
  (`planning.checkpoints`).
- in-flight tokens (`planning.in_flight`): "batched", max_num_batched_tokens; "batches", max_concurrent_batches x
  max_num_batched_tokens, with pp + 1 batches under async scheduling on the V2 runner, 2 on the V1 runner at pp 1,
  pp otherwise (config/vllm.py).
- "Maximum concurrency" = num_blocks / blocks per request; "GPU KV cache size" (`planning.tokens`) =
  int(concurrency x max_model_len), or num_blocks // groups x block.
- the start-up check (`_check_enough_kv_cache_memory`): no memory at all, or bytes per block x blocks per request
  above the memory, raises ValueError with the text `check` rebuilds (worded as `planning.hint` says); where
  `planning.null_block`, the null block the block pool keeps comes off the memory it checks first; its estimated
  maximum model length is the largest length whose need fits, by vLLM's binary search.
"""

from __future__ import annotations

import math

from kbtool.errors import KbError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


DOCS = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
HINT_UTILIZATION = ("Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls "
                    "CPU memory reservation on the CPU backend, despite its name).")
HINT_SHORT = "Try increasing `gpu_memory_utilization` when initializing the engine."
TOO_SMALL_TAIL_SHORT = ("Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
                        "engine. ")
TOO_SMALL_TAIL = ("Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
                  "decreasing `max_model_len` when initializing the engine. ")
FIELDS = ("in_flight", "null_block", "checkpoints", "mamba2_checkpoints", "gdn_checkpoints", "sliding_v", "tokens",
          "hint")  # the record's `planning:` (kbtool/model/engine_release.py Planning)


class Planning:
    """What one vLLM release does when it plans the KV cache: its engine-release record's `planning:` (each field
    described in kbtool/model/engine_release.py Planning, each value citing the release's code) and, from its
    `defaults:`, `hybrid_prefix_caching` (prefix caching, and so Mamba state mode "align", on by default for hybrid
    models). `release`: the record's release, whose line this is (a release between recorded ones takes the line
    below it: planning())."""

    __slots__ = ("release", "hybrid_prefix_caching", *FIELDS)

    def __init__(self, release: str, row: dict[str, Any]) -> None:
        self.release = release
        plan = row.get("planning") or {}
        missing = [f for f in FIELDS if f not in plan]
        if missing:
            raise KbError(f"engine-release {row.get('id') or release}: `planning` lacks {', '.join(missing)}",
                          fix="add them to records/engine-releases/vllm-" + release + ".yaml (`kb validate` names "
                          "the line)")
        self.in_flight, self.null_block = str(plan["in_flight"][0]), bool(plan["null_block"][0])
        self.checkpoints, self.mamba2_checkpoints = bool(plan["checkpoints"][0]), bool(plan["mamba2_checkpoints"][0])
        self.gdn_checkpoints, self.sliding_v = bool(plan["gdn_checkpoints"][0]), bool(plan["sliding_v"][0])
        self.tokens, self.hint = str(plan["tokens"][0]), str(plan["hint"][0])
        self.hybrid_prefix_caching = bool(row["defaults"]["hybrid_prefix_caching"][0])


def planning(release: str | None, rows: dict[str, Any] | None = None) -> Planning:
    """The planning line of `release`: its engine-release record's, else the newest recorded at or below it (older
    than all: the oldest; None: the release kb's reserve was measured on, records.measured). `rows`: vLLM's
    engine-release rows of the query image (defaults.rows); None: the records tree's (records.recorded)."""
    from kbtool.solve.engines.vllm import records

    rows = records.recorded() if rows is None else rows
    rel = records.line_release(release, rows, "planning")
    return Planning(rel, rows[rel])


class Point:
    """The settings a plan depends on besides memory and the groups: max_model_len, max_num_batched_tokens, async
    scheduling, pipeline stages, the V2 model runner, the Mamba state mode and its prefill checkpoint pages."""

    __slots__ = ("async_scheduling", "batched_tokens", "checkpoint_blocks", "draft_blocks", "mamba_mode",
                 "max_model_len", "pp", "v2")

    def __init__(self, max_model_len: int, batched_tokens: int, *, async_scheduling: bool = True, pp: int = 1,
                 v2: bool = True, mamba_mode: str = "none", checkpoint_blocks: int = 0, draft_blocks: int = 0) -> None:
        self.max_model_len, self.batched_tokens, self.async_scheduling = max_model_len, batched_tokens, async_scheduling
        self.pp, self.v2, self.mamba_mode, self.checkpoint_blocks = pp, v2, mamba_mode, checkpoint_blocks
        # an MTP draft's speculative tokens: one more state page each per Mamba layer (spec.Draft.state_blocks)
        self.draft_blocks = draft_blocks


GDN = frozenset({"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"})
MAMBA2 = frozenset({"NemotronHForCausalLM"})


def state_mode(plan: Planning, architecture: str | None, sm: str | None, hybrid: bool,
               prefix_caching: bool | None = None) -> tuple[str, int]:
    """The Mamba state mode and prefill checkpoint pages a hybrid model gets: mode "align" where prefix caching is
    on for it (the release's default for hybrids, or `prefix_caching`: --enable-prefix-caching /
    --no-enable-prefix-caching as given); then, where the release counts checkpoint pages, a Mamba-2 layer
    exports one (`planning.mamba2_checkpoints`: 0.33.0 model_executor/layers/mamba/mamba_mixer2.py:1108-1118), and a
    GDN layer does where FlashInfer's GDN prefill runs (`planning.gdn_checkpoints`:
    layers/mamba/gdn/qwen_gdn_linear_attn.py:689-702, 148-165: Hopper, or Blackwell at head_k_dim 128 with CUDA
    runtime 13, taken here as the wheels' runtime).

    Prefix caching given on a release whose hybrids default to it off: vLLM sets mamba_cache_mode "all" for a model
    class that supports Mamba prefix caching, else "align" (model_executor/models/config.py:417-432 in 0.24.0, commit
    ee0da84ab); the GDN models (qwen3_next.py, qwen3_5.py) do not declare it, so they take "align"; kb does not model
    "all", and leaves the other hybrids' state at one page there."""
    if not hybrid:
        return "none", 0
    on = plan.hybrid_prefix_caching if prefix_caching is None else prefix_caching
    if not on or (not plan.hybrid_prefix_caching and architecture not in GDN):
        return "none", 0
    if not plan.checkpoints:
        return "align", 0
    if architecture in MAMBA2 and plan.mamba2_checkpoints:
        return "align", 1
    if plan.gdn_checkpoints and architecture in GDN and sm in ("sm90", "sm100", "sm103"):
        return "align", 1
    return "align", 0


def checkpoint_alignment(architecture: str | None, checkpoint_blocks: int) -> int:
    """The token alignment of a hybrid model's prefill checkpoints, which the attention block is widened in steps of
    (vllm_mamba.aligned_block): FlashInfer's GDN prefill checkpoints every 64 tokens (0.33.0
    v1/attention/backends/gdn_attn.py:34); a Mamba-2 layer at any token (mamba_mixer2.py:1117)."""
    return 64 if checkpoint_blocks and architecture in GDN else 1


def in_flight_tokens(plan: Planning, pt: Point) -> int:
    if plan.in_flight == "batched":
        return pt.batched_tokens
    if not pt.async_scheduling:
        return pt.pp * pt.batched_tokens
    batches = pt.pp + 1 if pt.v2 else (2 if pt.pp <= 1 else pt.pp)
    return batches * pt.batched_tokens


class Group:
    """One KV cache group: its type (full, sliding, mla, mamba), its layers as vLLM counts them (a padded type's
    last groups hold one layer fewer: vLLM deals layers i, i + n, ... to group i), page bytes, and its own block
    where vLLM widened it to unify the page sizes (None: the model's block).

    `pages`: a group of one attention type whose layers keep pages of different sizes (vLLM's
    UniformTypeKVCacheSpecs: a sparse-MLA model's latent and indexer caches), as ((page bytes, layers, what), ...)
    in the order vLLM registers the layers; one block of the group takes every layer's page, and `page_bytes` is
    the first layer's page, the spec vLLM's scheduler keeps for the group (generate_scheduler_kv_cache_config)."""

    __slots__ = ("block", "kind", "layers", "page_bytes", "pages", "window")

    def __init__(self, kind: str, layers: int, page_bytes: int, window: int | None = None,
                 block: int | None = None, pages: tuple[tuple[int, int, str], ...] | None = None) -> None:
        self.kind, self.layers, self.page_bytes, self.window = kind, layers, page_bytes, window
        self.block, self.pages = block, pages

    def block_bytes(self, layers: int) -> int:
        """Bytes one block of this group takes in the shared pool, where groups hold `layers` layers each."""
        return sum(p * n for p, n, _ in self.pages) if self.pages else self.page_bytes * layers



def group_blocks(g: Group, block: int, length: int, plan: Planning, pt: Point) -> int:
    """Blocks one request of `length` tokens holds in group `g` (at the group's own block where vLLM widened it)."""
    block = g.block or block
    if g.kind == "mamba":  # + num_speculative_blocks (MambaSpec.max_memory_usage_bytes; the release's record)
        if pt.mamba_mode == "align":
            return 2 + pt.draft_blocks + (pt.checkpoint_blocks if plan.checkpoints else 0)
        return 1 + pt.draft_blocks
    if g.kind == "sliding" and g.window:
        return math.ceil(min(g.window - 1 + in_flight_tokens(plan, pt), length) / block) + 1
    if g.kind == "chunked" and g.window:
        return math.ceil(min(g.window + in_flight_tokens(plan, pt), length) / block)
    return math.ceil(length / block)


def request_blocks(gs: Sequence[Group], block: int, length: int, plan: Planning, pt: Point) -> int:
    return sum(group_blocks(g, block, length, plan, pt) for g in gs)


def bytes_per_block(gs: Sequence[Group]) -> int:
    """The largest group's bytes in one block: its page x layers, or every layer's page in a group of one type
    whose pages differ (UniformTypeKVCacheSpecs: Group.pages)."""
    most = max(g.layers for g in gs)
    return max(g.block_bytes(most) for g in gs)


def extensible_hint(utilization: float | None = None, after_warmup: bool = False, extensible: bool = True) -> str:
    """The hint a release with the extensible KV cache gives when the KV cache is short (0.34.0
    v1/core/kv_cache_planning.py:64-94 at 62d4bc3c7, _more_kv_cache_memory_hint): what the cache is left after
    (and, after warm-up, that CUDA graphs take less with fewer capture sizes), worded for a utilization below 1.0
    where one was given; the utilization hint where the cache is off (--kv-cache-memory-bytes rules it out)."""
    if not extensible:
        return HINT_UTILIZATION
    used_by = "the model, its activations, CUDA graphs and warmup" if after_warmup else "the model and its activations"
    graphs = (" CUDA graphs take less with fewer or smaller capture sizes in the compilation config."
              if after_warmup else "")
    if utilization is not None and utilization < 1.0:
        return (f"The KV cache gets what is left after {used_by} within `gpu_memory_utilization`={utilization}; "
                "increase it (with the extensible KV cache it defaults to 1.0) or decrease `max_model_len` or "
                f"`max_num_seqs`.{graphs}")
    return (f"The extensible KV cache already takes all device memory left after {used_by}; decrease "
            f"`max_model_len` or `max_num_seqs`, or the model needs a device with more memory.{graphs}")


def check(gs: Sequence[Group], block: int, available: int, plan: Planning, pt: Point, *,
          utilization: float | None = None, after_warmup: bool = False, extensible: bool = True) -> str | None:
    """vLLM's start-up check: None where it passes, else the ValueError text it raises. A release whose hint is
    "extensible" words it by `utilization` (as given; None: the default 1.0), `extensible` (the cache on) and
    `after_warmup`: the check again on the blocks the cache was sized to after warm-up, `available` being those
    blocks' bytes, less the null block (0.34.0 v1/core/kv_cache_planning.py:1845-1858)."""
    per = bytes_per_block(gs)
    memory = available - per if plan.null_block or after_warmup else available
    hint = {"short": HINT_SHORT, "utilization": HINT_UTILIZATION}.get(plan.hint) or extensible_hint(
        utilization, after_warmup, extensible)
    if memory <= 0:
        return f"No available memory for the cache blocks. {hint} {DOCS}"
    need = per * request_blocks(gs, block, pt.max_model_len, plan, pt)
    if need <= memory:
        return None
    longest = estimate_max_model_len(gs, block, memory, plan, pt)
    estimated = (f"Based on the available memory, the estimated maximum model length is {longest}. "
                 if longest > 0 else "")
    tail = {"extensible": f"{hint} Decreasing `max_model_len` also reduces what is needed. ",
            "short": TOO_SMALL_TAIL_SHORT}.get(plan.hint, TOO_SMALL_TAIL)
    whose = "models's" if plan.hint == "short" else "model's"
    return (f"To serve at least one request with the {whose} max seq len ({pt.max_model_len}), "
            f"({gib(need)} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({gib(memory)} GiB). {estimated}{tail}{DOCS}")


def state_blocks_check(num_blocks: int, max_num_seqs: int, recurrent: bool, full_graphs: bool,
                       checks: Sequence[tuple[str, str, str, str]]) -> tuple[str, str, str] | None:
    """The check the model runner makes once the KV cache is sized, where the release has it (its record's
    startup_checks "max_num_seqs<=mamba_blocks"): with full CUDA graphs (a FULL decode mode: not --enforce-eager)
    a model with Mamba-style state layers needs one cache block per decode sequence, so max_num_seqs above the
    cache's num_blocks raises ValueError (config/compilation.py resolve_cudagraph_mode_and_sizes, e.g. 0.26.0
    :1480-1497). (raises, message, source) where it fails, else None."""
    if not (recurrent and full_graphs and max_num_seqs > num_blocks):
        return None
    for check, raises, message, source in checks:
        if check == "max_num_seqs<=mamba_blocks":
            return raises, message.format(max_num_seqs=max_num_seqs, num_blocks=num_blocks), source
    return None


def estimate_max_model_len(gs: Sequence[Group], block: int, memory: int, plan: Planning, pt: Point) -> int:
    """vLLM's binary search for the longest max_model_len whose need fits `memory` (0: not even one token)."""
    per = bytes_per_block(gs)

    def fits(n: int) -> bool:
        return per * request_blocks(gs, block, n, plan, pt) <= memory

    left, right = 1, pt.max_model_len
    if not fits(left):
        return 0
    result = 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def gib(n: int) -> str:
    """vLLM's format_gib (utils/mem_utils.py:30-31)."""
    return f"{round(n / (1 << 30), 2)}"
