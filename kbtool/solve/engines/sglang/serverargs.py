"""The ServerArgs fields SGLang would start with for a query: the pasted line's, then kb's options where the line is
silent (--kv as --kv-cache-dtype, --gpus as --tp-size, --ctx as --context-length, --block-size as --page-size), and
the KV dtypes in both spellings."""

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
    args = dict(q.settings) if q.engine == "sglang" else {}
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
