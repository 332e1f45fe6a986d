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
    return {"mla_prefill": rows, "releases": releases(by_kind), "device_names": device_names(by_kind)}


def releases(by_kind: dict[str, list[Any]]) -> dict[str, Any]:
    """vLLM's engine-release records by release: defaults {field: (value, source locator)}, the batch tiers
    (min GiB, names excluded, ccs excluded, tokens, seqs, locator), the extensible KV cache's margins and the
    start-up checks (check, exception, message, locator) (kbtool/solve/engines/vllm/defaults.py reads them)."""
    from kbtool.solve.engines.vllm.defaults import FIELDS

    out: dict[str, Any] = {}
    for r in sorted(by_kind.get("engine-release", []), key=lambda r: r.id):
        if r.engine != "vllm":
            continue
        defaults = {}
        for name in FIELDS:
            fact = getattr(r.defaults, name)
            defaults[name] = None if fact is None else (fact.value, _locator(r, fact.source or 0))
        batch = [(t.min_memory_gib, list(t.not_device_names), list(t.not_cc), t.max_num_batched_tokens,
                  t.max_num_seqs, _locator(r, t.source)) for t in r.batch]
        m = r.extensible_margins
        margins = None if m is None else {"floor_bytes": m.floor_bytes, "fraction": m.fraction,
                                          "non_torch_reserve_bytes": m.non_torch_reserve_bytes,
                                          "source": _locator(r, m.source)}
        checks = [(c.check, c.raises, c.message, _locator(r, c.source)) for c in r.startup_checks]
        out[r.release] = {"id": r.id, "release": r.release, "defaults": defaults, "batch": batch,
                          "margins": margins, "evidence": list(r.evidence), "checks": checks}
    return out


def device_names(by_kind: dict[str, list[Any]]) -> dict[str, str]:
    """Per accelerator, the device name vLLM reads (its first recorded device name, else its name)."""
    out = {}
    for a in by_kind.get("accelerator", []):
        names = [d.value for d in (getattr(a, "device_names", None) or []) if d.value]
        out[a.id] = str(names[0]) if names else a.name
    return out
