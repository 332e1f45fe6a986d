"""The axes a query fixes, and whether the KB holds knowledge about each for a kernel (issue 17 item 1).

A kernel is `ok` only when, for every axis the query fixes, some claim about the kernel (or a family it is a
variant of) reads one of the axis's variables: a gate, a caveat or a `supports` statement. Where nothing is
recorded about an axis the kernel is `unknown`: "the KB records nothing about <axis> for <kernel>".
The core axes (architecture, q dtype, KV dtype, head dim) are fixed by every query; the attention features
only when the model has them. `kb validate` lists kernels missing a core axis (kbtool/checks/axes.py).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

AXES: dict[str, frozenset[str]] = {
    "architecture": frozenset({"sm", "cc", "vendor", "gpu"}),
    "q dtype": frozenset({"dtype"}),
    "KV dtype": frozenset({"kv_dtype", "kv_dtype_differs"}),
    "head dim": frozenset({"head_dim", "head_dim_v"}),
    "attention sinks": frozenset({"sinks"}),
    "sliding window": frozenset({"sliding_window"}),
    "logit softcap": frozenset({"softcap"}),
    "ALiBi": frozenset({"alibi"}),
    "sparse attention": frozenset({"sparse"}),
}
CORE = ("architecture", "q dtype", "KV dtype", "head dim")


def fixed_axes(env: dict[str, Any]) -> list[str]:
    """The axes this environment fixes: the core ones it has values for, and the features that are on."""
    out = []
    if env.get("sm") is not None or env.get("vendor") is not None:
        out.append("architecture")
    if env.get("dtype") is not None:
        out.append("q dtype")
    if env.get("kv_dtype") is not None:
        out.append("KV dtype")
    if env.get("head_dim") is not None:
        out.append("head dim")
    if env.get("sinks") is True:
        out.append("attention sinks")
    if (env.get("sliding_window") or 0) > 0:
        out.append("sliding window")
    if (env.get("softcap") or 0) > 0:
        out.append("logit softcap")
    if env.get("alibi") is True:
        out.append("ALiBi")
    if env.get("sparse") is True:
        out.append("sparse attention")
    return out


def known_axes(reads: Iterable[str], attention: Iterable[str] = ()) -> set[str]:
    """The axes some claim reads (and `sparse attention` for kernels that implement sparse MLA)."""
    got = set(reads)
    out = {axis for axis, names in AXES.items() if got & names}
    if "sparse-mla" in set(attention):
        out.add("sparse attention")
    return out
