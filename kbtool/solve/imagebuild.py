"""The query image built from a loaded KB (kbtool/solve/image.py reads it): plain, marshal-able data, built once
per change of the records and cached (kbtool/query_cli.py). It sits above the engines: each engine compiles its own
section of the image (`Engine.section`), and the boots and boot errors are those of each engine's boot probe."""

from __future__ import annotations

import marshal

from kbtool.solve.image import IMAGE_VERSION, Image, model_row

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.kb import KB


def image_of(kb: KB) -> Image:
    """The image of a loaded KB, in memory (for callers that hold the KB)."""
    return Image(build(kb))


def _claim_row(c: Any, share: dict[bytes, Any], arch: dict[str, str],
               measured: dict[str, list[tuple[Any, ...]]], by_id: dict[str, Any] | None = None) -> tuple[Any, ...]:
    from kbtool.solve.conditions import compile_condition
    from kbtool.solve.templates import scope_text

    scope = tuple((r.library, r.introduced, r.fixed, r.last_affected) for r in c.scope)
    from kbtool.solve.conditions import condition_vars
    from kbtool.solve.templates import placeholders

    when, requires = compile_condition(c.when), compile_condition(c.requires)
    reads = condition_vars(when) | condition_vars(requires) | placeholders(c.reason.message)
    v = c.verification
    verdicts = tuple((d.scope.sm, tuple(sorted(d.scope.libraries.items())), d.scope.phase, d.status,
                      tuple(d.evidence)) for d in v.verdicts)
    if not verdicts and v.status in ("verified", "refuted"):  # not migrated: the evidence's architecture only
        verdicts = tuple((arch.get(e), (), None, v.status, (e,)) for e in v.evidence if arch.get(e))
    status = v.status
    if c.parts and by_id is not None:  # a two-part claim shows its weakest part (kbtool/views/parts.py)
        from kbtool.model.claim import shown_status

        status = shown_status(c, by_id)
        if status != v.status:  # the scoped verdicts are the stronger part's: they do not speak for the claim
            verdicts = ()
    if any(d[2] for d in verdicts):
        reads.add("phase")  # a verdict limited to a phase: the claim's status differs between phases
    sides = tuple((s.position, tuple(src.locator() for src in s.sources), compile_condition(s.requires))
                  for s in v.sides)
    for s in v.sides:
        reads |= condition_vars(compile_condition(s.requires))
    row = (c.id, c.subject, c.effect, when, requires, scope, scope_text(scope), status,
           tuple(v.evidence), c.reason.code, c.reason.message, c.reason.workaround,
           tuple(s.locator() for s in c.sources), tuple(sorted(reads)), verdicts, sides,
           tuple(m for d in v.verdicts if d.status == "verified" for e in d.evidence for m in measured.get(e, ())),
           tuple(c.handles))
    return tuple(_shared(x, share) for x in row)


def _call_row(b: Any, c: Any) -> tuple[Any, ...]:
    """A backend's kernel call as CallV reads it."""
    from kbtool.solve.conditions import compile_condition

    src = b.sources[c.source].locator() if c.source < len(b.sources) else ""
    return (c.kernel, c.build, c.fork_of, c.bundled, list(c.phases), list(c.attention), compile_condition(c.when),
            dict(c.shape), c.call, src, [(r.library, r.introduced, r.fixed, r.last_affected) for r in c.scope])


def _measured_rows(records: list[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Probe-measured values by the evidence record they came from (measurement records with `evidence`)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for m in records:
        if getattr(m, "evidence", None) and m.basis == "measured" and not _is_boot(m):
            for r in m.rows:
                conds = tuple(sorted((k, v) for k, v in r.conditions.items() if isinstance(v, (str, int, float))))
                out.setdefault(m.evidence, []).append((r.quantity, float(r.value), r.unit, conds, m.accelerator))
    return out


def _is_boot(m: Any) -> bool:
    """A measurement of an engine's boot probe (Engine.boot_probe), which the engine's pool is held to."""
    from kbtool.solve.engines import registry

    probe = str(m.conditions.get("probe", "")).split(" ", 1)[0]
    return any(e.boot_probe == probe for e in registry.ENGINES.values() if e.boot_probe)


def _boot_rows(records: list[Any]) -> list[tuple[Any, ...]]:
    """(accelerator, conditions, kv_cache_tokens, max_concurrency, measurement row id) of every recorded vLLM boot
    (kbtool/solve/engines/vllm/boots.py matches a query to them)."""
    out = []
    for m in records:
        if m.basis == "measured" and _is_boot(m):
            for r in m.rows:
                c = {k: v for k, v in r.conditions.items() if isinstance(v, (str, int, float, bool))}
                conc = float(r.metrics.get("max_concurrency") or 0)
                out.append((r.accelerator or m.accelerator, c, int(r.value), conc, f"{m.id}#{c.get('case')}"))
    return sorted(out, key=lambda t: t[4])


def _boot_errors(records: list[Any]) -> list[tuple[Any, ...]]:
    """(accelerator, {vllm, class, boots, lowest, highest, error, quantity}) of the derived record
    kbtool/probe/boot_error.py writes: kb's estimate against the recorded boots, per model class (and the V2 runner's
    profile-peak rise with CUDA graphs, per release: quantity profile_peak_rise_graphs)."""
    from kbtool.solve.engines import registry

    ids = {e.boot_error_record for e in registry.ENGINES.values() if e.boot_error_record}
    return [(r.accelerator or m.accelerator, {**r.conditions, "error": float(r.value), "quantity": r.quantity})
            for m in records if m.id in ids for r in m.rows]


def _shared(x: Any, share: dict[bytes, Any]) -> Any:
    """`x` with equal strings and tuples (conditions, scopes, sources) made one object (hash-consing).

    marshal then writes each once and loads them as shared objects, and the solver's per-environment memo
    (kbtool/solve/gates.py: Judge), keyed by object id, evaluates each distinct condition once. Keys are the
    marshalled bytes, which keep types apart (True, 1 and 1.0 are different keys)."""
    if isinstance(x, tuple):
        x = tuple(_shared(i, share) for i in x)
    elif not isinstance(x, str):
        return x
    return share.setdefault(marshal.dumps(x), x)


def _bench_row(c: Any) -> tuple[Any, ...]:
    return (c.id, c.phase, c.kernel, dict(c.conditions), c.outcome, list(c.samples), c.metrics.get("correct"),
            c.accelerator)


def _priority_row(p: Any) -> tuple[Any, ...]:
    from kbtool.solve.conditions import compile_condition

    return (p.id, p.engine, p.platform, [(s.library, s.introduced, s.fixed, s.last_affected) for s in p.scope],
            [(compile_condition(pl.when), list(pl.order)) for pl in p.lists])


def _engine_sections(by_kind: dict[str, list[Any]]) -> dict[str, Any]:
    """Each engine's own section: what its package's records.py `section(by_kind)` compiles (SGLang's resolution
    pipelines and claims), keyed by engine name; engines without one have none."""
    from kbtool.solve.engines import registry

    out = {}
    for name, eng in registry.ENGINES.items():
        got = eng.section(by_kind)
        if got is not None:
            out[name] = got
    return out


def build(kb: KB) -> dict[str, Any]:
    """The image of a loaded KB, as plain data (marshal-able)."""
    from kbtool.measure.table import bench_records

    by_kind: dict[str, list[Any]] = {}
    for r in kb:
        by_kind.setdefault(r.kind, []).append(r)
    kernels = sorted(by_kind.get("kernel", []), key=lambda r: r.id)
    claims = by_kind.get("claim", [])
    share: dict[bytes, Any] = {}
    by_subject: dict[str, list[tuple[Any, ...]]] = {}
    evidence_arch = {e.id: e.environment.architecture for e in by_kind.get("evidence", [])
                     if getattr(e, "environment", None) is not None and e.environment.architecture}
    measured = _measured_rows(by_kind.get("measurement", []))
    claim_ids = {c.id: c for c in claims}
    for c in claims:
        by_subject.setdefault(c.subject, []).append(_claim_row(c, share, evidence_arch, measured, claim_ids))
    libs = {k.library for k in kernels} | {s.library for c in claims for s in c.scope}
    bench: dict[str, list[tuple[Any, ...]]] = {}
    for case in bench_records(kb):
        if case.accelerator:
            bench.setdefault(case.accelerator, []).append(_bench_row(case))
    names: dict[str, dict[str, str]] = {}
    for alias, rid in kb.aliases.items():  # per kind; the first record to claim an alias keeps it, as in KB
        names.setdefault(kb.by_id[rid].kind, {})[alias] = rid
    lazy = marshal.dumps  # sections most queries never open are nested bytes, decoded on first use
    return {
        "version": IMAGE_VERSION,
        "names": {kind: lazy(table) for kind, table in names.items()},
        "kernels": [(k.id, k.library, list(k.phases), list(k.attention), k.variant_of, k.latest_version)
                    for k in kernels],
        "claims": by_subject,
        "libraries": sorted(libs),
        "kv_formats": {f.name: (f.bytes_per_token, k.sources[f.source].locator() if f.source < len(k.sources) else None)
                       for k in kernels for f in k.kv_formats},
        "cuda": _typical_cuda(kernels),
        "accelerators": lazy({a.id: (a.id, a.vendor, a.architecture, a.capacity_bytes(),
                                     a.memory_bytes is not None) for a in by_kind.get("accelerator", [])}),
        "cc": {a.id: a.compute_capability for a in by_kind.get("architecture", [])},
        "models": lazy({m.id: model_row(m) for m in by_kind.get("model", [])}),
        "backends": lazy(sorted(((b.id, b.engine, b.backend_name, list(b.kernels), list(b.attention),
                                  list(b.platforms), [_call_row(b, c) for c in b.calls])
                                 for b in by_kind.get("engine-backend", [])), key=lambda t: t[0])),
        "evidence_arch": evidence_arch,
        "releases": _releases(by_kind.get("evidence", [])),
        "probed": _probed(by_kind.get("evidence", [])),
        "priorities": lazy([_priority_row(p) for p in sorted(by_kind.get("engine-priority", []),  # solve/engine.py
                                                              key=lambda r: r.id)]),
        "bench": {acc: lazy(rows) for acc, rows in bench.items()},
        "boots": lazy(_boot_rows(by_kind.get("measurement", []))),
        "boot_errors": lazy(_boot_errors(by_kind.get("measurement", []))),
        **{f"engine-{name}": lazy(sec) for name, sec in _engine_sections(by_kind).items()},
    }


def _typical_cuda(kernels: list[Any]) -> str | None:
    """The `--assume typical` CUDA toolkit: the newest of each kernel's oldest supported toolkit (the oldest one
    every kernel that lists its toolkits is built for), None where no kernel lists them."""

    from kbtool.solve.conditions import version_key

    oldest = [min(k.cuda_toolkits.versions, key=version_key) for k in kernels if k.cuda_toolkits is not None]
    return max(oldest, key=version_key) if oldest else None


def _probed(evidence: list[Any]) -> dict[str, list[str]]:
    """library -> every release some evidence ran (oldest first): what `--lib X=V` is answered from."""

    from kbtool.solve.conditions import version_key
    from kbtool.vocab import LIBRARIES

    seen: dict[str, set[str]] = {}
    for e in evidence:
        env = getattr(e, "environment", None)
        for lib, ver in (dict(env.libraries or {}) if env is not None else {}).items():
            if lib in LIBRARIES and lib != "cuda":
                seen.setdefault(lib, set()).add(str(ver).split("+", 1)[0])
    return {lib: sorted(vs, key=version_key) for lib, vs in sorted(seen.items())}


def _releases(evidence: list[Any]) -> dict[str, str]:
    from kbtool.solve.conditions import compare_versions
    from kbtool.vocab import LIBRARIES

    out: dict[str, str] = {}
    for e in evidence:
        env = getattr(e, "environment", None)
        if env is None:
            continue
        libs = dict(env.libraries or {})
        if getattr(env, "torch", None):
            libs["torch"] = env.torch
        for lib, ver in libs.items():
            ver = str(ver).split("+", 1)[0]
            if lib in LIBRARIES and lib != "cuda" and (lib not in out or compare_versions(ver, out[lib]) > 0):
                out[lib] = ver
    return out


def dump(data: dict[str, Any]) -> bytes:
    return marshal.dumps(data)
