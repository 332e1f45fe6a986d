"""vLLM's section of the query image (kbtool/solve/imagebuild.py `_engine_sections`): what
kbtool/solve/engines/vllm/selection.py reads beyond the priority lists, compiled from its engine-priority records,
and its engine-release records by release (defaults.py, planning.py and pool.py read them), with the rule that picks
the release whose line another release takes (`line_release`)."""

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
                          "margins": margins, "evidence": list(r.evidence), "checks": checks,
                          "planning": _facts(r, r.planning), "accounting": _facts(r, r.accounting),
                          "parallel": _facts(r, getattr(r, "parallel", None)),
                          "speculative": _facts(r, getattr(r, "speculative", None))}
    return out


def _facts(r: Any, block: Any) -> dict[str, Any] | None:
    """{field: (value, source locator or None)} of a section of facts (None where the record has no such section)."""
    if block is None:
        return None
    out = {}
    for name in type(block).model_fields:
        fact = getattr(block, name)
        if fact is not None:
            out[name] = (fact.value, None if fact.source is None else _locator(r, fact.source))
    return out


def recorded() -> dict[str, Any]:
    """vLLM's engine-release rows read from the records tree itself (kbtool.paths.records_root), for a caller with
    no query image at hand (a probe program, a test); an answer reads its image's rows. Read once per process."""
    global _RECORDED
    if _RECORDED is None:
        from pathlib import Path

        from kbtool.errors import KbError
        from kbtool.paths import records_root
        from kbtool.store.records import load_tree

        root = Path(records_root())
        got = load_tree(root, [root / "engine-releases"])
        bad = [f for f in got.findings if f.severity == "error"]
        if bad:
            raise KbError(f"{bad[0].location()} {bad[0].path}: {bad[0].message}",
                          fix=bad[0].fix or "run `kb validate` and fix the engine-release record")
        _RECORDED = releases({"engine-release": got.records})
    return _RECORDED


_RECORDED: dict[str, Any] | None = None


def lines(rows: dict[str, Any]) -> dict[str, Any]:
    """The rows whose planning and accounting lines answer for a query image of `rows`: its own, or, where none of
    its vLLM records carries a `planning` line (a records tree that predates them, such as the tests' fixture tree),
    the records tree's (recorded()), as kb answered before the lines moved into the records."""
    return rows if any(row.get("planning") for row in rows.values()) else recorded()


def line_release(release: str | None, rows: dict[str, Any], section: str) -> str:
    """The recorded release whose `section` line (planning, accounting) `release` takes: the newest recorded with
    one at or below it, else the oldest; no release: the release kb's reserve was measured on (`measured`)."""

    from kbtool.errors import KbError
    from kbtool.solve.conditions import compare_versions, version_key

    have = sorted((r for r, row in rows.items() if row.get(section)), key=version_key)
    if not have:
        raise KbError(f"no vLLM engine-release record has `{section}`",
                      fix="restore records/engine-releases/vllm-*.yaml (see CONTRIBUTING, 'a new vLLM release')")
    if not release:
        release = measured(rows)
    below = [r for r in have if compare_versions(r, release) <= 0]
    return below[-1] if below else have[0]


def measured(rows: dict[str, Any]) -> str:
    """The release whose accounting kb's reserve constants were read against (its record's `accounting.measured`):
    what a query that names no vLLM release is sized as."""
    from kbtool.errors import KbError

    got = [r for r, row in rows.items() if ((row.get("accounting") or {}).get("measured") or (False,))[0]]
    if len(got) != 1:
        raise KbError(f"{len(got)} vLLM engine-release records say `accounting.measured: true`; one must",
                      fix="set it on the release the recorded vllm-boot evidence measured (records/engine-releases)")
    return got[0]


def device_names(by_kind: dict[str, list[Any]]) -> dict[str, str]:
    """Per accelerator, the device name vLLM reads (its first recorded device name, else its name)."""
    out = {}
    for a in by_kind.get("accelerator", []):
        names = [d.value for d in (getattr(a, "device_names", None) or []) if d.value]
        out[a.id] = str(names[0]) if names else a.name
    return out
