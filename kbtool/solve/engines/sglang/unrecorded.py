"""An SGLang release kb has no resolution for (issue 47), answered as vLLM answers one it has not swept
(kbtool/solve/engines/vllm/grid.py `select_unrecorded`): by the recorded releases around it, each with its own
resolution (backends, page size) and its own pool for the query, named, and "not swept"; never one of them in the
release's place. The answer is conditional; its fix is the sweep that records the release.

What SGLang did before its oldest recorded release or does after its newest is not known: the text says which
side the release is on and what the recorded release there does, nothing more.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.context import Ctx
    from kbtool.solve.image import AcceleratorV


def fix(release: str) -> str:
    """The command that records the release."""
    return f"run `kb probe sweep --lib sglang --releases {release}` to record it"


def words(eng: Any, cx: Ctx, acc: AcceleratorV, env: dict[str, Any], release: str) -> str:  # eng: the Sglang engine
    """What recorded `release` does with the query on this accelerator: its resolution and its pool, or the error
    it raises."""
    from kbtool.solve.engines.sglang.pool import memory_for

    r = eng.resolution(cx, acc, env, release)
    if r.get("error"):
        return f"refuses: {r['error']}: {r['message']}"
    if not r.get("prefill") or not r.get("decode"):
        return "chooses by the model's architecture"
    pre, dec = r["prefill"], r["decode"]
    text = f"selects {dec}" if pre == dec else f"selects prefill {pre}, decode {dec}"
    text += f", page size {r.get('page_size')}"
    mem = memory_for(eng, cx, acc, env, {}, release=release, notes=[])
    pool = mem.pool if mem is not None else None
    if pool is not None and pool.error:  # its start-up refusal, first sentence
        text += f"; does not start: {pool.error.partition('. ')[0]}"
    elif pool is not None and pool.tokens is not None:
        text += f"; pool {pool.tokens:,} tokens"
        if mem is not None and mem.fits is False:
            text += " (does not hold the request)"
    return text


def between(eng: Any, cx: Ctx, acc: AcceleratorV, env: dict[str, Any], release: str, known: list[str]) -> str:
    """The recorded releases around `release` (oldest first in `known`) and what each does (module docstring)."""
    from kbtool.solve.conditions import neighbours

    below, above = neighbours(release, known)
    if below and above:
        lo, hi = words(eng, cx, acc, env, below), words(eng, cx, acc, env, above)
        if lo == hi:
            return f"between {below} and {above} (each {lo}): not swept"
        return f"between {below} ({lo}) and {above} ({hi}): not swept"
    if below or above:
        side = below or above
        assert side is not None
        where = "after the newest" if below else "before the oldest"
        return f"{where} recorded release {side} ({words(eng, cx, acc, env, side)}): not swept"
    return "no SGLang release is recorded"
