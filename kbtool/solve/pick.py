"""The verdict once the engine's pick is known: the picked backend's own caveats, and whether kb's kernel layer
agrees with it (issue 26: "the two layers must agree, or the answer must say which one holds and why").

- An engine-layer caveat of the backend vLLM picks (e.g. `vllm-fa3-fp8-kv-needs-bf16-model`: it starts, then
  fails at first use) makes a "yes" conditional and is shown first.
- Where vLLM validates a backend whose every kernel kb's claims refuse for this head size (head dim 512 on an
  H100: FLASH_ATTN, with FA-2/3/4 all refusing it), the answer says it starts and to expect a failure at first
  use. Other refusals are left to the kernel table: a backend may run code kb has no kernel record of (vLLM's
  fp8 FLASHMLA runs its own extension, not upstream FlashMLA's kernel).
"""

from __future__ import annotations

from typing import Any

from kbtool.solve.answer import BackendAnswer, KernelAnswer, Reason
from kbtool.solve.gates import structural


def with_pick(engine: dict[str, Any] | None, backends: list[BackendAnswer], kernels: list[KernelAnswer],
              where: str, verdict: str, summary: str) -> tuple[str, str, list[Reason]]:
    """(verdict, summary, caveats to show first) given vLLM's selection `engine`."""
    picked = next((b for b in backends if engine and b.id == engine.get("selected")), None)
    if picked is None:
        return verdict, summary, []
    first = [r for r in picked.caveats if r.layer == "engine" and not r.handled]
    if first and verdict == "yes":
        verdict = "conditional"
        summary = summary.replace(": yes with", ": yes with caveats, with", 1)
    gone = any(r.code == "KERNELS_REJECTED" for r in picked.reasons)
    ks = list(picked.kernels)
    by_id = {k.id: k for k in kernels}
    shape = bool(ks) and all(any(r.code == "HEAD_DIM" for r in by_id[k].reasons) for k in ks if k in by_id)
    if gone and shape and verdict in ("yes", "conditional"):
        names = ", ".join(ks)
        verdict = "conditional"
        summary = (f"{where}: starts with {picked.backend_name} (vLLM {(engine or {}).get('vllm')}'s choice), but "
                   f"kb's kernel claims refuse this head size for every kernel it runs ({names}): expect a failure "
                   "at first use")
        first.insert(0, structural("KERNELS_REJECTED", f"vLLM validates this backend, but kb's kernel claims refuse "
                                   f"this head size for every kernel it runs ({names}; --explain): expect a failure "
                                   "at first use", "engine", subject=picked.id))
    return verdict, summary, first
