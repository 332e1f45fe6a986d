"""The order to try (design.md §4, issue 17 item 7): per phase, the engine's own priority (with --engine),
then latency measured on this GPU at a matching shape, then the rest.

The engine's priority comes from its `engine-priority` records (kbtool/solve/engines/vllm/selection.py
`priority_order`); the
caveats an engine handles by default are the table below: vLLM's flash-attention fork enables two-level FP8
accumulation by default (vllm-project/flash-attention hopper/utils.h:238 @ 617264c1c7955c9e84817654ebeedff069f3c5f1).
"""

from __future__ import annotations

from kbtool.vocab import LIBRARY_RANK  # without an engine or a measurement, kernels rank by library

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.parts import KernelAnswer

PASSING = ("ok", "caveat")

def _fa_default(sm: str | None) -> str:
    """The FlashAttention generation vLLM picks by default on this architecture: FA-3 on 9.x, FA-4 on 10.x and
    above, FA-2 elsewhere (vllm/v1/attention/backends/fa_utils.py @ 7283494f, engine-gates.md §3.3)."""
    digits = sm[2:] if sm and sm.startswith("sm") else ""
    n = int(digits) if digits.isdigit() else 0  # sm90 -> 90, sm100 -> 100, sm120 -> 120
    if 90 <= n < 100:
        return "flash-attention-3"
    if n >= 100:
        return "flash-attention-4"
    return "flash-attention-2"


FA_GENERATIONS = ("flash-attention-2", "flash-attention-3", "flash-attention-4")


def _older_fa(kid: str, fa: str) -> bool:
    """A FlashAttention generation older than the one built for this architecture (FA-2 on Hopper and Blackwell):
    it runs, but the architecture's own kernels come first, as the engines order them (vLLM's cc 10.x list puts
    FlashInfer before FLASH_ATTN, whose FA-2 is its fallback there: engine-priority records)."""
    return kid in FA_GENERATIONS and FA_GENERATIONS.index(kid) < FA_GENERATIONS.index(fa)


def _fragile(k: KernelAnswer, phase: str) -> bool:
    """A caveat about the architecture itself (code ARCH: FlashInfer on Turing) ranks a kernel after those without."""
    return any(r.code == "ARCH" and r.phase in (None, phase) for r in k.caveats)


def recommended(kernels: list[KernelAnswer], phases: list[str], engine_rank: dict[str, int],
                sm: str | None = None) -> dict[str, list[str]]:
    """{phase: kernel ids that pass there, in the order to try}."""
    fa = _fa_default(sm)
    out: dict[str, list[str]] = {}
    for p in phases:
        good = [k for k in kernels if k.phase_status.get(p) in PASSING]
        # the rest: dedicated attention libraries before framework fallbacks, then the kernels the KB knows
        # most about (a caveat is a thing to know, not a demotion, except one about the architecture itself)
        good.sort(key=lambda k: (engine_rank.get(k.id, 10**6), k.rank or 10**6, _fragile(k, p), _older_fa(k.id, fa),
                                 LIBRARY_RANK.get(k.library or "", 9), k.id != fa, -k.gates, k.id))
        out[p] = [k.id for k in good]
    return out


def engine_ranks(backends: list[Any], order: list[str]) -> dict[str, int]:
    """kernel id -> the position of the first passing backend that reaches it in the engine's order (backend
    record ids, as the engine-priority records list them)."""
    pos = {name: i for i, name in enumerate(order)}
    out: dict[str, int] = {}
    for b in backends:
        if b.status not in PASSING:
            continue
        i = pos.get(b.id, len(order))
        for k in b.kernels:
            out[k] = min(out.get(k, 10**6), i)
    return out
