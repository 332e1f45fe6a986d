"""The reference graph: one node per record, one edge per reference. Validation and views share it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx

    from kbtool.kb import KB


def build(kb: KB) -> nx.MultiDiGraph[str]:
    """Nodes are record ids (kind in `kind`); dangling targets become nodes with kind None."""
    import networkx as nx

    g: nx.MultiDiGraph[str] = nx.MultiDiGraph()
    for r in kb:
        g.add_node(r.id, kind=r.kind)
    for r in kb:
        for rel, target in r.refs():
            if target not in g:
                g.add_node(target, kind=None)
            g.add_edge(r.id, target, rel=rel)
    return g


ACYCLIC_RELATIONS = ("extends", "supersedes", "variant_of")
