"""A query held to the vLLM boots kb has recorded: the boot it repeats, or how far kb's estimate was for its class.

A boot (records/measurements/*-vllm-boot-*-measured.yaml, written from the vllm-boot probe's evidence) is the
same question as a query when the model is the same (architecture, parameters within 1%, layers, hidden size,
vocabulary, weight dtype), on the same accelerator, alone on one GPU, with the same max_model_len, memory
utilization, KV dtype, eager or graphs, max_num_batched_tokens and max_num_seqs. On the same vLLM release its
numbers are the answer ("measured"); on another release they are shown beside kb's estimate. Elsewhere the answer
is kb's estimate, with the error kb showed on the recorded boots of the model's class
(kbtool/probe/boot_error.py writes that record; RECORD_ID below).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.image import Image, ModelV

RECORD_ID = "vllm-boot-estimate-error"  # the derived record kbtool/probe/boot_error.py writes
ERROR = "kv_cache_tokens_error"  # its rows per model class
RISE = "profile_peak_rise_graphs"  # its rows of the V2 runner's profile-peak rise with CUDA graphs (boot_error.RISE)


CONDITIONS = ("max_model_len", "kv_cache_dtype", "enforce_eager", "max_num_batched_tokens", "max_num_seqs",
              "model_runner", "dtype", "text_only", "speculative", "prefix_caching")
"""The flags a query must share with a boot (besides the memory utilization); the last five are absent (None) on a
boot and a query at the release's default runner, --dtype auto, with every encoder, without a draft and without
--[no-]enable-prefix-caching (kbtool/probe/judges/vllm_boot.py conditions)."""


def model_class(model: ModelV) -> str:
    """The class whose recorded boots say how good kb's estimate is for this model."""
    types = {g.type for g in model.layers}
    if "linear" in types:
        return "mamba or linear-attention hybrid"
    if types == {"sliding"}:  # every layer slides (Phi-3-mini): no full layer beside them
        return "sliding-window"
    if "sliding" in types:
        return "sliding-window hybrid"
    if "mla" in types:
        return "MLA"
    if getattr(model, "experts", None):
        return "MoE"
    return "dense"


def _same_model(c: dict[str, Any], model: ModelV) -> bool:
    params = c.get("parameters") or 0
    return (c.get("architecture") == model.architecture and c.get("layers") == sum(g.count for g in model.layers)
            and c.get("hidden_size") == model.hidden_size and c.get("vocab_size") == model.vocab_size
            and c.get("weight_dtype") == model.weight_dtype
            and bool(params) and abs(model.parameters / params - 1) <= 0.01)


def matches(img: Image, acc: str, model: ModelV, flags: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The recorded boots that ask this question (any release), newest row id last."""
    if flags.get("tp", 1) != 1 or flags.get("pp", 1) != 1:
        return []
    out = []
    for row in img.boots():
        b_acc, c = row[0], row[1]
        if b_acc != acc or not _same_model(c, model):
            continue
        if all(c.get(k) == flags.get(k) for k in CONDITIONS) \
                and abs(float(c.get("gpu_memory_utilization") or 0) - float(flags["gpu_memory_utilization"])) < 1e-6:
            out.append(row)
    return out


def class_error(img: Image, acc: str, release: str | None, cls: str) -> dict[str, Any] | None:
    """kb's error on the recorded boots of this class and release: on this accelerator if there are any, else on
    any recorded accelerator (the answer says which); None where `release` has no boot of the class (the answer
    then says "no boot of vLLM X: estimated", never another release's error)."""
    rows = img.boot_errors()
    for want in (acc, None):
        for r in rows:
            a, c = r
            if c.get("quantity", ERROR) == ERROR and c.get("class") == cls and c.get("vllm") == release and \
                    (want is None or a == want):
                return {"accelerator": a, **c}
    return None


def graph_rise(img: Image, acc: str, release: str | None) -> dict[str, Any] | None:
    """How much higher the V2 runner's profile peak was with CUDA graphs than eager on `release`'s recorded boots (on
    this accelerator if there are any, else any): kb does not model it, the answer quotes it; None where `release`
    has no such boot."""
    rows = img.boot_errors()
    for want in (acc, None):
        for a, c in rows:
            if c.get("quantity") == RISE and c.get("vllm") == release and (want is None or a == want):
                return {"accelerator": a, **c}
    return None
