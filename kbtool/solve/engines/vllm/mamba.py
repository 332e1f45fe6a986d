"""How vLLM 0.24.0 fits Mamba (linear-attention) state into the KV pool of a hybrid model; used by vllm_pool.

Read in the 0.24.0 wheel (paths under vllm/):

- Which mode: a hybrid model does not turn prefix caching on by default (config/model.py:1832-1837, taken up at
  engine/arg_utils.py:2492-2493), so MambaModelConfig leaves mamba_cache_mode "none" and sets the Mamba block to
  max_model_len (model_executor/models/config.py:417-461); the boots' MambaSpec groups show block_size 8192 for
  an 8192-token max_model_len. kb models that default only ("align" / "all", with prefix caching, are not).
- One layer's state page: MambaSpec.page_size_bytes, the bytes of every state tensor summed (prod(shape) x dtype
  size), or the padded page once one is set (v1/kv_cache_interface.py:629-645). For NemotronH the tensors are the
  conv state (conv_dim / tp, conv_kernel - 1) and the SSM state (heads / tp, head_dim, state_size)
  (model_executor/models/nemotron_h.py:825-851, model_executor/layers/mamba/mamba_utils.py:162-187).
- The attention block (platforms/interface.py:594-630, 633-800): the backend first picks its block (16 for
  FLASH_ATTN), then, for hybrid models, the block is widened so that one attention page covers a state page. The
  step is the alignment max(smallest kernel block, current block) (interface.py:743-750; FLASH_ATTN's kernel
  blocks are [16, 32, 64] with an fp32 SSM state, multiples of 16 otherwise, flash_attn.py:77-94: 16 either
  way). Outside mode "all" the block is the fewest alignment steps whose page, at the bytes one token takes in
  one attention layer (a block-1 Full/MLA attention spec, interface.py:667-719), reaches the state page
  (interface.py:763-768); the block only ever grows (771-777). The state page is then padded up to that
  attention page (interface.py:779-800), so every layer shares one page size.
- Per request (v1/kv_cache_interface.py:648-657): a Mamba layer needs one page in mode "none" (plus one per
  speculative token, none here), whatever the context, so each Mamba group adds one block to a request's count
  in get_max_concurrency_for_kv_cache_config (v1/core/kv_cache_utils.py:919-937).
"""

from __future__ import annotations

import math

from kbtool.solve.engines.vllm.kvcache import STATE_BYTES, state_page

KERNEL_BLOCK = 16  # the smallest kernel block size of vLLM's FLASH_ATTN backend on CUDA


def aligned_block(state_bytes: int, attn_bytes_per_token: int, block: int, kernel_block: int = KERNEL_BLOCK,
                  checkpoint_alignment: int = 1) -> int:
    """The attention block vLLM settles on in a hybrid model: whole steps of max(kernel_block, block) tokens, as
    few as make one attention layer's page at least one Mamba layer's state page; `block` when there is no
    state. In state mode "align" the step is also a multiple of the Mamba layers' prefill checkpoint alignment
    (0.33.0 platforms/interface.py:1089-1094: 64 for FlashInfer's GDN prefill, v1/attention/backends/gdn_attn.py:34;
    1 for Mamba-2)."""
    if state_bytes <= 0 or attn_bytes_per_token <= 0:
        return block
    step = math.lcm(max(kernel_block, block), checkpoint_alignment)
    return max(block, step * math.ceil(state_bytes / (step * attn_bytes_per_token)))


def layer_state_bytes(g: object, tp: int, spec_tokens: int = 0) -> int | None:
    """One Mamba layer's unpadded state page on one GPU (None where kb does not know it); `spec_tokens`: a
    speculative draft's tokens, which widen the conv state (kvcache.state_page; None where the record gives only
    a total, which cannot be widened)."""
    state = getattr(g, "state", None)
    if state:
        dtypes = [s["dtype"] if isinstance(s, dict) else s.dtype for s in state]
        return state_page(state, tp, spec_tokens) if all(d in STATE_BYTES for d in dtypes) else None
    total = getattr(g, "state_bytes", None)
    return total // tp if total and not spec_tokens else None
