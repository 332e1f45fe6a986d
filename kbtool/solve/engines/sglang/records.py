"""SGLang's section of the query image (kbtool/solve/imagebuild.py `_engine_sections`): what
kbtool/solve/engines/sglang/resolve.py reads, compiled from its engine-backend, engine-priority and claim records."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def section(by_kind: dict[str, list[Any]]) -> dict[str, Any]:
    """What kbtool/solve/engines/sglang/resolve.py reads: per release and platform the default lists (backend names) and
    the pipeline steps (compiled conditions), the formula constants, and the SGLang claims with the exception type
    and place each release raises them (from the claim's sources: `section` "... raises <Type> in <function>")."""
    from kbtool.solve.conditions import compile_condition

    backends = {b.id: b for b in by_kind.get("engine-backend", []) if b.engine == "sglang"}
    pipelines: dict[str, dict[str, Any]] = {}
    releases: set[str] = set()
    for p in sorted(by_kind.get("engine-priority", []), key=lambda r: r.id):
        if p.engine != "sglang":
            continue
        rels = {v for r in p.scope for v in (r.introduced, r.last_affected) if v}
        steps = []
        for st in p.steps:
            sets = None
            if st.set is not None:
                sets = tuple((k, ("copy", v.var, v.times) if hasattr(v, "var") else v) for k, v in st.set.items())
            keep = tuple((k, tuple(v)) for k, v in st.keep.items())
            src = p.sources[st.source].locator() if st.source is not None else None
            steps.append((st.name, compile_condition(st.when), sets, keep, st.pick, st.check, src))
        lists = [(compile_condition(pl.when), [backends[b].backend_name if b in backends else b for b in pl.order])
                 for pl in p.lists]
        consts = {k: c.value for k, c in p.constants.items()}
        for v in rels:
            releases.add(v)
            pipelines.setdefault(v, {})[p.platform] = {"id": p.id, "lists": lists, "steps": steps, "constants": consts}
    claims = {}
    for c in by_kind.get("claim", []):
        if not c.id.startswith("sglang-"):
            continue
        where: dict[str, tuple[str, str]] = {}
        for s in c.sources:
            sec = s.section or ""
            if not sec.startswith("sglang ") or " raises " not in sec or not s.path:
                continue
            release = sec.split()[1]
            exc, func = sec.split(" raises ", 1)[1].split(" in ", 1)
            path = s.path.split("sglang/", 1)[1] if "sglang/" in s.path else s.path
            where[release] = (exc, f"{path}:{s.line}:{func}")
        claims[c.id] = (compile_condition(c.when), compile_condition(c.requires), c.reason.message, where,
                        tuple((r.library, r.introduced, r.fixed, r.last_affected) for r in c.scope))
    return {"releases": sorted(releases), "pipelines": pipelines, "claims": claims,
            "backends": {b.backend_name: (b.id, list(b.kernels), list(b.attention),
                                          [(r.introduced, r.last_affected) for r in b.scope])
                         for b in backends.values()}}
