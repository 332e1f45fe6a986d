"""Each reference check as a pure function on an in-memory KB."""

from __future__ import annotations

from kbtool.checks.references import (
    find_alias_collisions,
    find_cycles,
    find_dangling_refs,
    find_former_id_collisions,
    find_self_refs,
)
from kbtool.kb import KB
from kbtool.model import Architecture, Kernel

SRC = [{"type": "seed", "seed": "s.txt"}]


def arch(id_: str, extends: str | None = None, aliases: list[str] | None = None) -> Architecture:
    return Architecture(id=id_, kind="architecture", name=id_, family="f", extends=extends, aliases=aliases or [],
                        sources=SRC)


def test_cycle_through_extends() -> None:
    kb = KB.from_records([arch("a", "b"), arch("b", "c"), arch("c", "a"), arch("d", "a")])
    (f,) = find_cycles(kb)
    assert f.code == "KB204" and "a -> b -> c -> a" in f.message


def test_no_cycle_in_a_tree() -> None:
    assert find_cycles(KB.from_records([arch("a"), arch("b", "a"), arch("c", "a")])) == []


def test_supersedes_cycle_between_kernels() -> None:
    k1 = Kernel(id="k1", kind="kernel", name="k1", library="l", phases=["decode"], supersedes="k2", sources=SRC)
    k2 = Kernel(id="k2", kind="kernel", name="k2", library="l", phases=["decode"], supersedes="k1", sources=SRC)
    assert [f.code for f in find_cycles(KB.from_records([k1, k2]))] == ["KB204"]


def test_dangling_and_self() -> None:
    kb = KB.from_records([arch("a", "zz"), arch("b", "b")])
    assert [f.message for f in find_dangling_refs(kb)] == ["'zz' is not a known record (extends)"]
    assert [f.code for f in find_self_refs(kb)] == ["KB205"]


def test_alias_collision_case_insensitive() -> None:
    kb = KB.from_records([arch("sm90"), arch("x", aliases=["SM90"]), arch("y", aliases=["h"]),
                          arch("z", aliases=["H"])])
    assert sorted(f.message for f in find_alias_collisions(kb)) == [
        "alias 'H' already names 'y'", "alias 'SM90' already names 'sm90'"]


def _claim(id_: str, formerly: list[str] | None = None, aliases: list[str] | None = None):  # type: ignore[no-untyped-def]
    from kbtool.model import Claim

    return Claim.model_validate({"id": id_, "kind": "claim", "name": id_, "subject": "a", "statement": "s",
                                 "effect": "reject", "reason": {"code": "X", "message": "m"}, "sources": SRC,
                                 "formerly": formerly or [], "aliases": aliases or []})


def _evidence(claim: str):  # type: ignore[no-untyped-def]
    from kbtool.model import Evidence

    return Evidence.model_validate({
        "id": "ev", "kind": "evidence", "name": "ev", "sources": SRC, "probe": {"id": "p", "version": 1},
        "environment": {"gpu": "none", "compute_capability": "none"}, "started": "2026-12-01T00:00:00Z",
        "verdicts": [{"claim": claim, "verdict": "confirmed", "scope": {"vllm": "0.34.0"}}],
        "data": {"outcomes": {claim: {"outcome": "holds"}, "other": {"outcome": "none"}}}})


def test_a_renamed_claim_keeps_its_evidence() -> None:
    """Evidence is never edited: a verdict under the claim's former id is the renamed claim's, and so are its
    release outcomes; the former id finds the claim; no reference dangles."""
    from kbtool.model import Evidence

    kb = KB.from_records([arch("a"), _claim("vllm-x-block-size", formerly=["vllm-x-block-size-0.33.0"]),
                          _evidence("vllm-x-block-size-0.33.0")])
    ev = kb.get("ev")
    assert isinstance(ev, Evidence)
    assert [v.claim for v in ev.verdicts] == ["vllm-x-block-size"]
    assert set(ev.data["outcomes"]) == {"vllm-x-block-size", "other"}
    assert kb.resolve("vllm-x-block-size-0.33.0").id == "vllm-x-block-size"
    assert find_dangling_refs(kb) == [] and find_former_id_collisions(kb) == []
    plain = KB.from_records([arch("a"), _claim("c"), _evidence("c")])
    assert plain.get("ev") is not None and plain.renamed == {}


def test_a_former_id_names_one_claim_only() -> None:
    kb = KB.from_records([arch("a"), _claim("c1", formerly=["a"]), _claim("c2", formerly=["old"]),
                          _claim("c3", formerly=["old", "c3"]), _claim("c4", formerly=["typed"]),
                          _claim("c5", aliases=["typed"])])
    assert sorted(f.message for f in find_former_id_collisions(kb)) == [
        "former id 'a' is ambiguous: 'a' has it", "former id 'c3' is ambiguous: its own id",
        "former id 'old' is ambiguous: 'c2' has it", "former id 'typed' is ambiguous: 'c5' has it"]
    assert {f.code for f in find_former_id_collisions(kb)} == {"KB207"}
    assert "a" not in kb.renamed  # a record's own id is never read as another claim's former id
