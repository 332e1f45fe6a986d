from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kbtool.store.reader import MAX_DEPTH, parse_bytes


def test_lines_of_nested_paths() -> None:
    doc, problems = parse_bytes(b"a: 1\nb:\n  c:\n    - x\n    - {y: 2}\n", "f.yaml")
    assert not problems and doc is not None
    assert doc.lines[("b", "c", 1, "y")] == 5
    assert doc.line_of(("b", "c", 0)) == 4
    assert doc.line_of(("b", "missing")) == 2  # falls back to the nearest parent


def test_dates_stay_strings_and_numbers_are_numbers() -> None:
    doc, _ = parse_bytes(b"d: 2026-12-01\nn: 12\nf: 1.5\nb: true\nz: null\n", "f.yaml")
    assert doc is not None
    assert doc.data == {"d": "2026-12-01", "n": 12, "f": 1.5, "b": True, "z": None}


def test_duplicate_key_is_located() -> None:
    doc, problems = parse_bytes(b"a: 1\nb: 2\na: 3\n", "f.yaml")
    assert doc is None
    assert problems[0].line == 3 and "duplicate key 'a' (first at line 1)" in problems[0].message


def test_depth_cap() -> None:
    doc, problems = parse_bytes(b"x: " + b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5), "f.yaml")
    assert doc is None and "nesting deeper" in problems[0].message


def test_huge_integer_is_a_finding() -> None:
    doc, problems = parse_bytes(b"n: " + b"9" * 400 + b"\n", "f.yaml")
    assert doc is None and "out of range" in problems[0].message


def test_merge_keys_refused() -> None:
    doc, problems = parse_bytes(b"a: &x {k: 1}\nb:\n  <<: *x\n", "f.yaml")
    assert doc is None and "merge keys" in problems[0].message


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(raw: bytes) -> None:
    doc, problems = parse_bytes(raw, "fuzz.yaml")
    assert (doc is None) == bool(problems)
    for p in problems:
        assert p.code == "KB100" and p.file == "fuzz.yaml"
