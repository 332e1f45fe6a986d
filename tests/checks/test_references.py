"""Each reference check as a pure function on an in-memory KB."""

from __future__ import annotations

from kbtool.checks.references import find_alias_collisions, find_cycles, find_dangling_refs, find_self_refs
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
