"""How each vLLM release plans its KV cache from the memory left for it, and its start-up check: kb's replay of vLLM's
own planning, held to the vllm-kv-planning probe's recordings at every point (tests/solve/test_vllm_planning.py).

Given the KV cache groups (pool.groups) and the bytes available on one rank, per release (cited per field of
Planning; paths under vllm/ in that release's wheel):

- bytes per block: the largest group's pages, page x layers per group (0.24.0 v1/core/kv_cache_utils.py:950-969
  `_pool_bytes_per_block`; 0.33.0 v1/core/kv_cache_planning.py:574-600 `_get_kv_cache_bytes_per_block`);
  num_blocks = available // bytes per block (kv_cache_utils.py:972-989; kv_cache_planning.py:1566-1576).
- blocks a request of max_model_len holds, summed over groups (0.24.0 kv_cache_utils.py:919-937; 0.33.0
  kv_cache_utils.py:1061-1093, a cdiv per group): full attention and MLA cdiv(len, block); sliding window
  cdiv(min(window - 1 + in-flight tokens, len), block) + 1; chunked local attention cdiv(min(chunk + in-flight
  tokens, len), block) (v1/kv_cache_interface.py SlidingWindowSpec / ChunkedLocalAttentionSpec
  max_admission_blocks_per_request); a Mamba layer's state pages: 1 in mode "none", 2 in mode "align" (prefix
  caching on), plus the prefill checkpoint pages where the release has them (0.33.0 kv_cache_interface.py:1135-1142).
- in-flight tokens: 0.24.0 max_num_batched_tokens (kv_cache_interface.py:528-537); 0.33.0 max_concurrent_batches x
  max_num_batched_tokens, with pp + 1 batches under async scheduling on the V2 runner, 2 on the V1 runner at pp 1,
  pp otherwise (config/vllm.py:587-609).
- "Maximum concurrency" = num_blocks / blocks per request; "GPU KV cache size" = int(concurrency x max_model_len)
  (kv_cache_utils.py:1120-1128; 0.23.0 kv_cache_utils.py:1720-1742); 0.19.1 logged num_blocks // groups x block
  (v1/core/kv_cache_utils.py:1302-1317; Planning.tokens).
- the start-up check (`_check_enough_kv_cache_memory`, 0.24.0 kv_cache_utils.py:733-775, 0.33.0
  kv_cache_planning.py:50-89): no memory at all, or bytes per block x blocks per request above the memory,
  raises ValueError with the text `check` rebuilds; 0.33.0 first takes the null block the block pool keeps off
  the memory it checks (kv_cache_planning.py:1533-1546); its estimated maximum model length is the largest
  length whose need fits, by vLLM's binary search; 0.34.0's message carries the extensible KV cache's hint
  (kv_cache_planning.py:64-94).
"""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from kbtool.solve.engines.vllm.pool import Group

DOCS = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
HINT_UTILIZATION = ("Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls "
                    "CPU memory reservation on the CPU backend, despite its name).")
HINT_EXTENSIBLE = ("The extensible KV cache already takes all device memory left after the model and its "
                   "activations; decrease `max_model_len` or `max_num_seqs`, or the model needs a device with more "
                   "memory.")
HINT_0_19 = "Try increasing `gpu_memory_utilization` when initializing the engine."
TOO_SMALL_TAIL_0_19 = ("Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
                       "engine. ")
TOO_SMALL_TAIL = ("Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
                  "decreasing `max_model_len` when initializing the engine. ")


class Planning:
    """What one vLLM release does when it plans the KV cache (see the module docstring for the lines):

    - `in_flight`: "batched" (0.24.0: max_num_batched_tokens) or "batches" (0.33.0: max_concurrent_batches x it);
    - `null_block`: the start-up check plans against the memory less one block (0.33.0);
    - `checkpoints`: Mamba prefill checkpoint pages count in mode "align" (0.33.0's MambaSpec has them);
    - `hint`: how the refusal is worded: "0.19" (0.19.1 v1/core/kv_cache_utils.py:620-653, "models's max seq len"
      and a shorter hint), "utilization" (0.24.0, 0.33.0), "extensible" (0.34.0, where the extensible KV cache
      is on by default on CUDA and gpu_memory_utilization resolves to 1.0: config/cache.py:395-501);
    - `hybrid_prefix_caching`: prefix caching, and so Mamba state mode "align", is on by default for hybrid
      models (0.33.0: MambaModelConfig.verify_and_update_config, model_executor/models/config.py:750-775; 0.32.0
      config/model.py:2259-2261 and models/config.py:685-695; 0.24.0 leaves it off for them,
      config/model.py:1832-1837);
    - `mamba2_checkpoints`: a Mamba-2 layer exports a prefill checkpoint page (0.32.0 mamba_mixer2.py:1107); 0.29.0
      to 0.31.0 count checkpoint pages in MambaSpec (0.30.0 v1/kv_cache_interface.py:1000-1042) but no layer
      exports one yet (their mamba_mixer2.py has no prefill checkpoint);
    - `tokens`: "GPU KV cache size" as int(concurrency x max_model_len) ("concurrency", 0.23.0 on) or as
      num_blocks // groups x block ("blocks per group", 0.19.1);
    - `sliding_v`: a sliding-window layer's page holds V at its own head size (SlidingWindowSpec.head_size_v, from
      0.20.0; 0.19.1 has none and sizes V as K, so a model whose V head is smaller gets pages that may not divide
      each other, and vLLM's page unification raises NotImplementedError: pool.groups returns None there);
    - `gdn_checkpoints`: GDN layers export a prefill checkpoint page where FlashInfer's GDN prefill runs (0.33.0;
      0.32.0 has the page for Mamba-2 layers only, layers/mamba/mamba_mixer2.py:1107).

    0.32.0 plans as 0.33.0 does, from v1/core/kv_cache_utils.py before the planning moved to its own module (the
    null block at kv_cache_utils.py:2627, in-flight batches at config/vllm.py:577): the probe's 1,628 points of
    0.32.0 replay with 0 mismatches on this line. 0.28.0 already counts the in-flight batches (config/vllm.py:550-
    566) and defaults hybrids to prefix caching (config/model.py:2072-2074, models/config.py:602-604), but checks
    against all of the memory (no null block) and has no checkpoint pages. Every release with a recording has its
    own line (tests/solve/engines/vllm/test_engine_release.py holds the query to it): 0.20.0 plans as 0.19.1 but its
    SlidingWindowSpec holds V at its own head size (v1/kv_cache_interface.py:406-410); 0.21.0 still words its refusal
    as 0.19.1 but reports tokens as concurrency x max_model_len (kv_cache_utils.py:1708) and sizes a sliding V head
    at its own size; 0.22.1-0.25.0 hold one batch
    in flight (0.25.0 kv_cache_interface.py:485-503) and report tokens as concurrency x max_model_len (0.23.0
    kv_cache_utils.py:1720-1742); 0.26.0 and 0.27.1 count the in-flight batches (0.26.0 config/vllm.py:512-532)
    with hybrids still off prefix caching; 0.29.0 and 0.30.0 already keep the null block off the checked memory
    (0.30.0 kv_cache_utils.py:2722-2726) and size MambaSpec's checkpoint pages, but no layer exports one. A release
    between recorded ones takes the line below it.
    """

    __slots__ = (
        "checkpoints",
        "gdn_checkpoints",
        "hint",
        "hybrid_prefix_caching",
        "in_flight",
        "mamba2_checkpoints",
        "null_block",
        "release",
        "sliding_v",
        "tokens",
    )

    def __init__(self, release: str, *, in_flight: str, null_block: bool, checkpoints: bool, hint: str,
                 hybrid_prefix_caching: bool, gdn_checkpoints: bool = False, sliding_v: bool = True,
                 tokens: str = "concurrency", mamba2_checkpoints: bool = True) -> None:
        self.release, self.in_flight, self.null_block, self.checkpoints = release, in_flight, null_block, checkpoints
        self.hint, self.hybrid_prefix_caching, self.gdn_checkpoints = hint, hybrid_prefix_caching, gdn_checkpoints
        self.sliding_v, self.tokens, self.mamba2_checkpoints = sliding_v, tokens, mamba2_checkpoints


PLANNING = (  # newest first; a release takes the line of the newest recorded release at or below it
    Planning("0.34.0", in_flight="batches", null_block=True, checkpoints=True, hint="extensible",
             hybrid_prefix_caching=True, gdn_checkpoints=True),
    Planning("0.33.0", in_flight="batches", null_block=True, checkpoints=True, hint="utilization",
             hybrid_prefix_caching=True, gdn_checkpoints=True),
    Planning("0.32.0", in_flight="batches", null_block=True, checkpoints=True, hint="utilization",
             hybrid_prefix_caching=True),
    Planning("0.31.0", in_flight="batches", null_block=True, checkpoints=True, hint="utilization",
             hybrid_prefix_caching=True, mamba2_checkpoints=False),
    Planning("0.30.0", in_flight="batches", null_block=True, checkpoints=True, hint="utilization",
             hybrid_prefix_caching=True, mamba2_checkpoints=False),
    Planning("0.29.0", in_flight="batches", null_block=True, checkpoints=True, hint="utilization",
             hybrid_prefix_caching=True, mamba2_checkpoints=False),
    Planning("0.28.0", in_flight="batches", null_block=False, checkpoints=False, hint="utilization",
             hybrid_prefix_caching=True),
    Planning("0.27.1", in_flight="batches", null_block=False, checkpoints=False, hint="utilization",
             hybrid_prefix_caching=False),
    Planning("0.26.0", in_flight="batches", null_block=False, checkpoints=False, hint="utilization",
             hybrid_prefix_caching=False),
    Planning("0.25.0", in_flight="batched", null_block=False, checkpoints=False, hint="utilization",
             hybrid_prefix_caching=False),
    Planning("0.24.0", in_flight="batched", null_block=False, checkpoints=False, hint="utilization",
             hybrid_prefix_caching=False),
    Planning("0.23.0", in_flight="batched", null_block=False, checkpoints=False, hint="utilization",
             hybrid_prefix_caching=False),
    Planning("0.22.1", in_flight="batched", null_block=False, checkpoints=False, hint="utilization",
             hybrid_prefix_caching=False),
    Planning("0.21.0", in_flight="batched", null_block=False, checkpoints=False, hint="0.19",
             hybrid_prefix_caching=False),
    Planning("0.20.0", in_flight="batched", null_block=False, checkpoints=False, hint="0.19",
             hybrid_prefix_caching=False, tokens="blocks per group"),
    Planning("0.19.1", in_flight="batched", null_block=False, checkpoints=False, hint="0.19",
             hybrid_prefix_caching=False, sliding_v=False, tokens="blocks per group"),
)


def planning(release: str | None) -> Planning:
    """The planning line of `release` (the newest recorded line at or below it; None: 0.24.0's, the boots' line;
    older than all: the oldest)."""
    if not release:
        return planning("0.24.0")
    from kbtool.solve.conditions import compare_versions

    for p in PLANNING:
        if compare_versions(release, p.release) >= 0:
            return p
    return PLANNING[-1]


class Point:
    """The settings a plan depends on besides memory and the groups: max_model_len, max_num_batched_tokens, async
    scheduling, pipeline stages, the V2 model runner, the Mamba state mode and its prefill checkpoint pages."""

    __slots__ = ("async_scheduling", "batched_tokens", "checkpoint_blocks", "mamba_mode", "max_model_len", "pp",
                 "v2")

    def __init__(self, max_model_len: int, batched_tokens: int, *, async_scheduling: bool = True, pp: int = 1,
                 v2: bool = True, mamba_mode: str = "none", checkpoint_blocks: int = 0) -> None:
        self.max_model_len, self.batched_tokens, self.async_scheduling = max_model_len, batched_tokens, async_scheduling
        self.pp, self.v2, self.mamba_mode, self.checkpoint_blocks = pp, v2, mamba_mode, checkpoint_blocks


GDN = frozenset({"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"})
MAMBA2 = frozenset({"NemotronHForCausalLM"})


def state_mode(plan: Planning, architecture: str | None, sm: str | None, hybrid: bool) -> tuple[str, int]:
    """The Mamba state mode and prefill checkpoint pages a hybrid model gets by default: mode "align" where the
    release turns prefix caching on for hybrids; then a Mamba-2 layer exports one checkpoint page
    (0.33.0 model_executor/layers/mamba/mamba_mixer2.py:1108-1118), and a GDN layer does where FlashInfer's GDN
    prefill runs (layers/mamba/gdn/qwen_gdn_linear_attn.py:689-702, 148-165: Hopper, or Blackwell at head_k_dim 128
    with CUDA runtime 13, taken here as the wheels' runtime)."""
    if not hybrid or not plan.hybrid_prefix_caching:
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


def group_blocks(g: Group, block: int, length: int, plan: Planning, pt: Point) -> int:
    """Blocks one request of `length` tokens holds in group `g` (at the group's own block where vLLM widened it)."""
    block = g.block or block
    if g.kind == "mamba":
        if pt.mamba_mode == "align":
            return 2 + (pt.checkpoint_blocks if plan.checkpoints else 0)
        return 1
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


def check(gs: Sequence[Group], block: int, available: int, plan: Planning, pt: Point) -> str | None:
    """vLLM's start-up check: None where it passes, else the ValueError text it raises."""
    per = bytes_per_block(gs)
    memory = available - per if plan.null_block else available
    hint = HINT_EXTENSIBLE if plan.hint == "extensible" else HINT_UTILIZATION
    if plan.hint == "0.19":
        hint = HINT_0_19
    if memory <= 0:
        return f"No available memory for the cache blocks. {hint} {DOCS}"
    need = per * request_blocks(gs, block, pt.max_model_len, plan, pt)
    if need <= memory:
        return None
    longest = estimate_max_model_len(gs, block, memory, plan, pt)
    estimated = (f"Based on the available memory, the estimated maximum model length is {longest}. "
                 if longest > 0 else "")
    tail = {"extensible": f"{hint} Decreasing `max_model_len` also reduces what is needed. ",
            "0.19": TOO_SMALL_TAIL_0_19}.get(plan.hint, TOO_SMALL_TAIL)
    whose = "models's" if plan.hint == "0.19" else "model's"
    return (f"To serve at least one request with the {whose} max seq len ({pt.max_model_len}), "
            f"({gib(need)} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({gib(memory)} GiB). {estimated}{tail}{DOCS}")


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
