"""Kernels missing a core axis: no claim about the kernel says anything about its architecture, q dtype, KV dtype
or head dims, so every query that fixes that axis answers `unknown` for it (issue 17 item 1)."""

from __future__ import annotations

from kbtool.checks import check
from kbtool.findings import Finding
from kbtool.kb import KB
from kbtool.model.claim import Claim
from kbtool.model.common import condition_vars
from kbtool.model.kernel import Kernel
from kbtool.solve.axes import CORE, known_axes
from kbtool.solve.templates import placeholders


def _lineage(kb: KB, k: Kernel) -> list[str]:
    out, cur = [k.id], k
    while cur.variant_of and cur.variant_of not in out:
        out.append(cur.variant_of)
        nxt = kb.by_id.get(cur.variant_of)
        if not isinstance(nxt, Kernel):
            break
        cur = nxt
    return out


@check("KB403", "kernel-missing-axis", "every kernel has a claim about each core axis (architecture, q dtype, "
       "KV dtype, head dim); otherwise queries answer unknown for it")
def find_kernels_missing_axes(kb: KB) -> list[Finding]:
    reads: dict[str, set[str]] = {}
    for c in kb:
        if isinstance(c, Claim):
            got = reads.setdefault(c.subject, set())
            got |= condition_vars(c.when) | condition_vars(c.requires) | placeholders(c.reason.message)
    out = []
    for k in kb:
        if not isinstance(k, Kernel):
            continue
        seen = set().union(*(reads.get(s, set()) for s in _lineage(kb, k)))
        missing = [a for a in CORE if a not in known_axes(seen, k.attention)]
        if missing:
            w = kb.where.get(k.id)
            out.append(Finding("KB403", f"kernel {k.id} has no claim about {', '.join(missing)}; queries answer "
                               "unknown for it", w.file if w else None, w.line() if w else None, "$",
                               severity="warning", check="kernel-missing-axis",
                               fix=f"add a sourced claim with subject {k.id} whose condition or message reads "
                                   f"the axis (a reject gate, a caveat, or effect: supports)"))
    return out
