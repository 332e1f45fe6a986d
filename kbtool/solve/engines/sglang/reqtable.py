"""SGLang's request-to-token table: the int32 map from each running request to its tokens' slots in the KV pool,
which SGLang allocates next to the pool out of the memory mem_fraction_static leaves outside it (issue 44).

Read in SGLang 0.5.17 and 0.5.23 (0.5.20 the same at its own lines; the releases in between share the code):
- the table: `ReqToTokenPool.__init__` allocates `torch.zeros((size + 1, max_context_len), dtype=torch.int32)` on
  the GPU, one padding row at index 0 (0.5.17 mem_cache/memory_pool.py:256-283, 0.5.20 :259-287, 0.5.23
  :376-409); Mamba / linear-attention models get a `HybridReqToTokenPool`, the same table plus their state pool
  (0.5.17 memory_pool.py:1136, 0.5.23 :1355);
- its sizes: `size` is max_num_reqs, the max_running_requests `resolve_max_num_reqs` gives (0.5.17
  mem_cache/kv_cache_configurator.py:1719-1750, 0.5.23 :3119-3150; kb: plan.py), and `max_context_len` is the
  model's context_len plus `get_req_to_token_extra_context_len()`: 4 + the speculative draft tokens (0.5.17
  mem_cache/allocation_sizing.py:46-62, 0.5.20 :85-105, 0.5.23 :96-116; with speculative decoding and pages
  over 1 token, or 0.5.23's UNO drafts at any page size, it grows to the decode reserve + page_size - 1, which kb
  does not model: a speculative line is answered conditional anyway) (0.5.17 kv_cache_configurator.py:815-838,
  0.5.23 :1755-1777 `_build_default_req_pool`);
- where it comes from: `configure` first plans the pool (`_resolve_memory_pool_config`, whose budget
  `_profile_available_bytes` is the memory free after the load less the slack `pre-load free x (1 -
  mem_fraction_static)`, less the multimodal reservation from 0.5.18: 0.5.17 :1614-1657, 0.5.23 :2990-3060),
  then `_init_pools` builds this table before the KV pool (0.5.17 kv_cache_configurator.py:385-412, 0.5.23
  :742-777). So the table is allocated from the memory free after the load, and the KV pool after it still
  needs its whole budget: the table must fit in what the budget leaves out (the slack and the multimodal
  reservation). Nothing else of SGLang's is allocated there between the two (CUDA graphs and activations come
  after the pools, out of what is left of the slack; kb does not count them here).
A table larger than the memory free after the load is torch's "CUDA out of memory. Tried to allocate N GiB" at
the table itself (sgl-project/sglang#5755: 80.04 GiB = 2,049 x 10,485,764 x 4 B, Llama-4-Scout's 10M-token
context); one that fits there but not in the slack leaves the KV pool short, and its allocation runs out of
memory. The fixes are a shorter --context-length or fewer --max-running-requests (each row is one request).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30
INT32 = 4  # bytes per entry (torch.int32)
EXTRA_COLUMNS = 4  # get_req_to_token_extra_context_len's base headroom per row
OOM = "torch.OutOfMemoryError"


@dataclass(frozen=True)
class Table:
    """One req_to_token table: (max_running_requests + 1) rows x (context_len + extra) int32 columns."""

    max_running_requests: int
    context_len: int
    extra: int = EXTRA_COLUMNS

    @property
    def rows(self) -> int:
        return self.max_running_requests + 1

    @property
    def columns(self) -> int:
        return self.context_len + self.extra

    @property
    def bytes(self) -> int:
        return self.rows * self.columns * INT32

    def shape(self) -> str:
        """How the formula and the error spell it out."""
        return (f"(max_running_requests {self.max_running_requests:,} + 1) x (context_len {self.context_len:,} + "
                f"{self.extra}) x 4 B")


def table(max_running_requests: int, context_len: int, draft_tokens: int = 0) -> Table:
    """The table SGLang allocates: extra = 4 + the speculative draft tokens (get_req_to_token_extra_context_len)."""
    return Table(max_running_requests, context_len, EXTRA_COLUMNS + max(0, draft_tokens))


def refusal(t: Table, *, free_bytes: int, room_bytes: int, mem_fraction_static: float) -> tuple[str, str] | None:
    """(exception type, message) where SGLang's start-up runs out of memory over this table, else None.
    `free_bytes`: the memory free after the weights load; `room_bytes`: what the pool's budget leaves of it."""
    what = f"SGLang's request-to-token table (ReqToTokenPool.req_to_token, {t.shape()})"
    if t.bytes > free_bytes:
        return OOM, (f"CUDA out of memory. Tried to allocate {t.bytes / GIB:.2f} GiB for {what}, with "
                     f"{max(free_bytes, 0) / GIB:.2f} GiB free after the weights load")
    if t.bytes > room_bytes:
        return OOM, (f"CUDA out of memory allocating the KV cache: {what} takes {t.bytes / GIB:.2f} GiB of the "
                     f"{max(room_bytes, 0) / GIB:.2f} GiB that --mem-fraction-static {mem_fraction_static:g} leaves "
                     "outside the KV pool")
    return None


def most_requests(context_len: int, room_bytes: int, draft_tokens: int = 0) -> int:
    """The largest --max-running-requests whose table fits in `room_bytes` at `context_len` (0 if none)."""
    return max(0, room_bytes // (table(0, context_len, draft_tokens).columns * INT32) - 1)
