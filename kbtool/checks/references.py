"""Reference integrity on the record graph: duplicates, dangling refs, alias collisions, cycles."""

from __future__ import annotations

from typing import Any

from kbtool.checks import check
from kbtool.findings import Finding
from kbtool.kb import KB
from kbtool.model import FOLDERS


@check("KB201", "duplicate-id", "no two records share an id")
def find_duplicate_ids(kb: KB) -> list[Finding]:
    out = []
    for item in kb.duplicates:
        rid = item.record.id if item.record else "?"
        first = kb.where[rid].file if rid in kb.where else "?"
        out.append(Finding("KB201", f"duplicate id '{rid}' (also in {first})", item.file, item.line("id"), "$.id",
                           fix="give one of the records another id", check="duplicate-id"))
    return out


def _data(kb: KB, rid: str) -> Any:
    """A record's fields as written (or, for a record built in memory, as dumped)."""
    return kb.where[rid].data if rid in kb.where else kb.by_id[rid].model_dump(by_alias=True)


def _ref_path(kb: KB, rid: str, rel: str, target: str, data: Any = None) -> tuple[str | None, int | None, str]:
    """Locate the field that holds a reference, for the message (`data`: the record's, when the caller has it)."""
    data = _data(kb, rid) if data is None else data
    for key, val in data.items() if isinstance(data, dict) else []:
        if val == target:
            file, line = kb.location(rid, key)
            return file, line, f"$.{key}"
        if isinstance(val, list):
            for i, v in enumerate(val):
                if v == target:
                    file, line = kb.location(rid, key, i)
                    return file, line, f"$.{key}[{i}]"
                for sub, x in v.items() if isinstance(v, dict) else []:  # a measurement's rows
                    if x == target:
                        file, line = kb.location(rid, key, i, sub)
                        return file, line, f"$.{key}[{i}].{sub}"
    file, line = kb.location(rid)
    return file, line, f"$ ({rel})"


@check("KB202", "dangling-ref", "every reference names a record that exists")
def find_dangling_refs(kb: KB) -> list[Finding]:
    out = []
    for r in kb:
        data = None  # dumped once per record, and only for a record with a dangling reference
        for rel, target in r.refs():
            if kb.exists(target) or rel == "xref":
                continue
            data = _data(kb, r.id) if data is None else data
            file, line, path = _ref_path(kb, r.id, rel, target, data)
            near = kb.aliases.get(target.lower())
            fix = f"use the id '{near}'" if near else "add the record, or fix the id"
            out.append(Finding("KB202", f"'{target}' is not a known record ({rel})", file, line, path, fix=fix,
                               check="dangling-ref"))
    return out


@check("KB203", "alias-collision", "an alias names exactly one record and is not another record's id")
def find_alias_collisions(kb: KB) -> list[Finding]:
    owner: dict[str, str] = {r.id.lower(): r.id for r in kb}
    out = []
    for r in kb:
        for i, a in enumerate(r.aliases):
            key = a.lower()
            if key in owner and owner[key] != r.id:
                file, line = kb.location(r.id, "aliases", i)
                out.append(Finding("KB203", f"alias '{a}' already names '{owner[key]}'", file, line,
                                   f"$.aliases[{i}]", fix="drop or rename the alias", check="alias-collision"))
            owner.setdefault(key, r.id)
    return out


@check("KB207", "former-id-collision", "a claim's former id (formerly) names no other record, alias or claim")
def find_former_id_collisions(kb: KB) -> list[Finding]:
    from kbtool.model import Claim

    taken = {name.lower(): r.id for r in kb for name in (r.id, *r.aliases)}  # ids and aliases, not former ids
    first: dict[str, str] = {}
    out = []
    for c in kb.of_kind("claim", Claim):
        for i, old in enumerate(c.formerly):
            other = kb.by_id.get(old)
            owner = other.id if other is not None else taken.get(old.lower())
            if owner is None and first.setdefault(old, c.id) != c.id:
                owner = first[old]
            if owner is not None or old == c.id:
                file, line = kb.location(c.id, "formerly", i)
                what = "its own id" if old == c.id else f"'{owner}' has it"
                out.append(Finding("KB207", f"former id '{old}' is ambiguous: {what}", file, line,
                                   f"$.formerly[{i}]", fix="a former id names one claim only: drop it here, or "
                                   "rename the other record", check="former-id-collision"))
    return out


def _has_cycle(edges: set[tuple[str, str]]) -> bool:
    """Whether the directed graph has a cycle (Kahn: a node left with incoming edges after peeling)."""
    succ: dict[str, list[str]] = {}
    indeg: dict[str, int] = {}
    for u, v in edges:
        succ.setdefault(u, []).append(v)
        indeg[v] = indeg.get(v, 0) + 1
        indeg.setdefault(u, 0)
    ready = [n for n, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for m in succ.get(n, []):
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    return seen < len(indeg)


@check("KB204", "reference-cycle", "no cycles through extends, supersedes or variant_of")
def find_cycles(kb: KB) -> list[Finding]:
    from kbtool.graph import ACYCLIC_RELATIONS

    edges = {(r.id, t) for r in kb for rel, t in r.refs() if rel in ACYCLIC_RELATIONS and t != r.id}
    if not _has_cycle(edges):
        return []  # the usual case: no graph library needed
    import networkx as nx

    sub: nx.DiGraph[str] = nx.DiGraph(sorted(edges))
    out = []
    for cycle in nx.simple_cycles(sub):
        i = cycle.index(min(cycle))
        cycle = cycle[i:] + cycle[:i]
        head = cycle[0]
        file, line = kb.location(head)
        chain = " -> ".join([*cycle, cycle[0]])
        out.append(Finding("KB204", f"reference cycle: {chain}", file, line, "$",
                           fix="break the cycle; inheritance and supersession must form a tree",
                           check="reference-cycle"))
    return out


@check("KB205", "self-reference", "a record does not reference itself")
def find_self_refs(kb: KB) -> list[Finding]:
    out = []
    for r in kb:
        for rel, target in r.refs():
            if target == r.id:
                file, line, path = _ref_path(kb, r.id, rel, target)
                out.append(Finding("KB205", f"record references itself ({rel})", file, line, path,
                                   fix="remove the reference", check="self-reference"))
    return out


@check("KB206", "file-location", "a record lives at records/<kind folder>/<id>.yaml")
def find_misplaced(kb: KB) -> list[Finding]:
    out = []
    for r in kb:
        w = kb.where.get(r.id)
        if w is None:
            continue
        want = f"{FOLDERS[r.kind]}/{r.id}.yaml"
        have = w.path.as_posix()
        if not have.endswith("/" + want) and have != want:
            out.append(Finding("KB206", f"record '{r.id}' should live at {want}", w.file, w.line("id"), "$.id",
                               fix=f"move the file to records/{want}", check="file-location"))
    return out
