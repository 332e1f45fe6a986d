"""vLLM's section of the query image (kbtool/solve/image.py `_engine_sections`): what
kbtool/solve/engines/vllm/selection.py reads beyond the priority lists, compiled from its engine-priority records."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _locator(p: Any, i: int) -> str:
    """Where the source at index `i` points (an index past the sources is kb validate's KB301, not a crash)."""
    return str(p.sources[i].locator()) if i < len(p.sources) else f"source {i} (missing)"


def section(by_kind: dict[str, list[Any]]) -> dict[str, Any]:
    """The MLA prefill orders per vLLM engine-priority record: (id, platform, scope, lists, calls), where a list
    is (compiled when, order, {refused name: why}, source locator) and calls is {backend name: what it calls}."""
    from kbtool.solve.conditions import compile_condition

    rows = []
    for p in sorted(by_kind.get("engine-priority", []), key=lambda r: r.id):
        if p.engine != "vllm" or p.mla_prefill is None:
            continue
        lists = [(compile_condition(pl.when), list(pl.order), dict(pl.refused), _locator(p, pl.source))
                 for pl in p.mla_prefill.lists]
        calls = {name: c.call for name, c in p.mla_prefill.calls.items()}
        rows.append((p.id, p.platform, [(s.library, s.introduced, s.fixed, s.last_affected) for s in p.scope],
                     lists, calls))
    return {"mla_prefill": rows}
