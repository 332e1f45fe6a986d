"""`kb graph`: neighbors, why (the chain that admits or rejects a kernel), export. Impact is in impact.py.

Everything runs on the reference graph validation uses (kbtool.graph.build).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from kbtool.errors import UsageError
from kbtool.kb import KB
from kbtool.model import Accelerator, Claim, Kernel
from kbtool.solve.answer import Answer
from kbtool.solve.parts import KernelAnswer, Reason

if TYPE_CHECKING:
    import networkx as nx

    from kbtool.solve.query import Query

EXPORT_FORMATS = ("dot", "graphml", "mermaid")


def neighbors(kb: KB, name: str, depth: int = 1) -> dict[str, Any]:
    """Records within `depth` references of a record, either direction, with the edges among them."""
    import networkx as nx

    from kbtool.graph import build

    if depth < 1:
        raise UsageError(f"--depth: {depth} must be at least 1", fix="e.g. --depth 2")
    rec = kb.resolve(name)
    g = build(kb)
    dist: dict[str, int] = nx.single_source_shortest_path_length(g.to_undirected(as_view=True), rec.id,
                                                                  cutoff=depth)
    nodes = [{"id": n, "kind": g.nodes[n].get("kind"), "distance": d, "name": _name(kb, n)}
             for n, d in sorted(dist.items(), key=lambda x: (x[1], str(g.nodes[x[0]].get("kind")), x[0]))]
    edges = sorted({(u, v, d["rel"]) for u, v, d in g.edges(data=True) if u in dist and v in dist})
    return {"id": rec.id, "depth": depth, "nodes": nodes,
            "edges": [{"from": u, "to": v, "rel": r} for u, v, r in edges]}


def _name(kb: KB, rid: str) -> str | None:
    r = kb.get(rid)
    return r.name if r else None


def lineage(kb: KB, k: Kernel) -> list[Kernel]:
    out, seen = [k], {k.id}
    while out[-1].variant_of and out[-1].variant_of not in seen:
        nxt = kb.get(out[-1].variant_of)
        if not isinstance(nxt, Kernel):
            break
        seen.add(nxt.id)
        out.append(nxt)
    return out


def _reason_step(role: str, r: Reason) -> dict[str, Any]:
    return {"role": role, "id": r.claim or None, "kind": "claim" if r.claim else "structural", "code": r.code,
            "verification": r.verification, "message": r.message, "phase": r.phase, "layer": r.layer,
            "evidence": list(r.evidence), "subject": r.subject}


def why(kb: KB, kernel: str, q: Query) -> dict[str, Any]:
    """The chain of records behind one kernel's status in the solver's answer for `q` (which names a GPU).

    accelerator -> architecture -> kernel (-> the families it is a variant of) -> the claims that reject it,
    leave it unknown or add caveats (with their evidence), refuted gates that were not enforced, the gates it
    passed, and with --engine the backends that reach it.
    """
    from kbtool.solve.solver import resolve, solve

    if not q.gpu:
        raise UsageError("kb graph why needs --gpu", fix="e.g. kb graph why flash-attention-4 --gpu h100")
    krec = kb.by_id[resolve(kb, kernel, "kernel")]
    assert isinstance(krec, Kernel)
    q.kernels = [krec.id]
    ans = solve(kb, q)
    assert isinstance(ans, Answer)
    ka: KernelAnswer = ans.kernels[0]
    acc = kb.get(str(ans.query["gpu"]))
    assert isinstance(acc, Accelerator)
    arch = kb.get(acc.architecture)
    chain: list[dict[str, Any]] = [
        {"role": "accelerator", "id": acc.id, "kind": "accelerator", "message": acc.name},
        {"role": "architecture", "id": acc.architecture, "kind": "architecture",
         "message": arch.name if arch else "not in the KB"},
    ]
    for i, k in enumerate(lineage(kb, krec)):
        chain.append({"role": "kernel" if i == 0 else "variant of", "id": k.id, "kind": "kernel",
                      "message": f"{k.name} ({k.library}; {', '.join(k.phases)})"})
    role = {"rejected": "rejects", "disputed": "disputed"}.get(ka.status, "undecided")
    chain += [_reason_step(role, r) for r in ka.reasons]
    chain += [_reason_step("caveat", r) for r in ka.caveats]
    chain += [_reason_step("refuted, not enforced", r) for r in ka.refuted]
    named = {s["id"] for s in chain}
    subjects = {k.id for k in lineage(kb, krec)} | {acc.id, acc.architecture}
    for cid in ans.claims_used:
        c = kb.get(cid)
        if isinstance(c, Claim) and cid not in named and c.subject in subjects:
            chain.append({"role": "passed", "id": cid, "kind": "claim", "code": c.reason.code,
                          "verification": c.verification.status, "message": c.statement,
                          "evidence": list(c.verification.evidence), "subject": c.subject})
    for b in ka.via:
        chain.append({"role": "via backend", "id": b, "kind": "engine-backend", "message": _name(kb, b)})
    return {"kernel": krec.id, "gpu": acc.id, "status": ka.status, "phase_status": ka.phase_status,
            "query": ans.query, "assumed": ans.assumed, "chain": chain, "workarounds": ka.workarounds}


# ---- export -------------------------------------------------------------------------------------


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _nodes(g: nx.MultiDiGraph[str]) -> list[tuple[str, str]]:
    """(id, kind) sorted by id; a dangling target's kind is 'missing'."""
    return sorted((str(n), str(g.nodes[n].get("kind") or "missing")) for n in g.nodes)


def _edges(g: nx.MultiDiGraph[str]) -> list[tuple[str, str, str]]:
    return sorted((str(u), str(v), str(d.get("rel"))) for u, v, d in g.edges(data=True))


def to_dot(g: nx.MultiDiGraph[str]) -> str:
    lines = ["digraph kb {", "  rankdir=LR;", "  node [shape=box, fontsize=10];"]
    lines += [f"  {_q(n)} [kind={_q(kind)}];" for n, kind in _nodes(g)]
    lines += [f"  {_q(u)} -> {_q(v)} [label={_q(rel)}];" for u, v, rel in _edges(g)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(g: nx.MultiDiGraph[str]) -> str:
    nodes = _nodes(g)
    ids = {n: f"n{i}" for i, (n, _) in enumerate(nodes)}
    lines = ["graph LR"]
    lines += [f'  {ids[n]}["{n}"]' for n, _ in nodes]
    lines += [f"  {ids[u]} -->|{rel}| {ids[v]}" for u, v, rel in _edges(g)]
    for kind in sorted({k for _, k in nodes}):
        members = [ids[n] for n, k in nodes if k == kind]
        lines.append(f"  class {','.join(members)} k_{kind.replace('-', '_')}")
    return "\n".join(lines) + "\n"


def to_graphml(g: nx.MultiDiGraph[str]) -> str:
    import networkx as nx

    h: nx.MultiDiGraph[str] = nx.MultiDiGraph()
    for n, d in g.nodes(data=True):
        h.add_node(n, kind=str(d.get("kind") or "missing"))
    for u, v, d in g.edges(data=True):
        h.add_edge(u, v, rel=d["rel"])
    buf = io.BytesIO()
    nx.write_graphml(h, buf)
    return buf.getvalue().decode()


def export(kb: KB, fmt: str) -> str:
    from kbtool.graph import build

    fmt = fmt.strip().lower()
    if fmt not in EXPORT_FORMATS:
        raise UsageError(f"--format: unknown format '{fmt}'", fix=f"use one of {', '.join(EXPORT_FORMATS)}")
    g = build(kb)
    return {"dot": to_dot, "graphml": to_graphml, "mermaid": to_mermaid}[fmt](g)
