"""The canonical form: schema line, key order, scalar style, comments kept, meaning never changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbtool.errors import InvalidRecordError
from kbtool.fmt import canonical, record_order, schema_line
from kbtool.store.reader import parse_bytes

from .conftest import write

CLAIM = Path("/kb/records/claims/x.yaml")
HEADER = "# yaml-language-server: $schema=../../schema/claim.schema.json\n"

MESSY = """\
kind: claim  # the kind
id: x
# about the name
name: "A claim"
statement: 'It holds.'
subject: flash-attention-2
sources:
- {url: 'https://example.org/a', type: doc}
reason:
  message: "got {head_dim}"
  code: HEAD_DIM
# comment above effect
effect: reject
# trailing comment
"""

WANT = HEADER + """\
id: x
kind: claim  # the kind
# about the name
name: A claim
subject: flash-attention-2
statement: It holds.
# comment above effect
effect: reject
reason:
  code: HEAD_DIM
  message: got {head_dim}
sources:
- {type: doc, url: 'https://example.org/a'}
# trailing comment
"""


def test_messy_record_becomes_canonical_with_its_comments() -> None:
    assert canonical(MESSY, CLAIM) == WANT


def test_canonical_is_a_fixed_point() -> None:
    assert canonical(WANT, CLAIM) == WANT


def test_record_key_order_starts_with_identity_and_ends_with_sources() -> None:
    order = record_order("claim")
    assert order[:4] == ("id", "kind", "name", "aliases")
    assert order[-2:] == ("sources", "notes")
    assert order.index("subject") < order.index("requires") < order.index("verification")


def test_schema_line_is_relative_to_the_checkout_schema_folder() -> None:
    assert schema_line(CLAIM, "claim") == HEADER.rstrip("\n")
    deep = Path("/kb/records/evidence/2026/run.yaml")
    assert schema_line(deep, "evidence").endswith("=../../../schema/evidence.schema.json")


def test_a_stale_schema_line_is_replaced() -> None:
    stale = "# yaml-language-server: $schema=old.json\n" + WANT.split("\n", 1)[1]
    assert canonical(stale, CLAIM) == WANT


@pytest.mark.parametrize(("value", "written"), [
    ("'plain text'", "plain text"),
    ('"9.0"', "'9.0'"),          # a float if plain
    ("'2.0.0'", "2.0.0"),          # a string either way
    ("'yes'", "'yes'"),            # a boolean to YAML 1.1 readers
    ("'1e3'", "'1e3'"),            # a float to YAML 1.2 readers
    ("''", "''"),
    ("'null'", "'null'"),
    ("'a: b'", "'a: b'"),
    ('"tab\\there"', '"tab\\there"'),  # needs an escape
    ("2026-01-02", "2026-01-02"),  # kb reads dates as text
])
def test_string_quoting(value: str, written: str) -> None:
    text = HEADER + f"id: x\nkind: claim\nname: {value}\n"
    out = canonical(text, CLAIM)
    assert out.splitlines()[3] == f"name: {written}"
    assert parse_bytes(out.encode(), "x")[0].data == parse_bytes(text.encode(), "x")[0].data  # type: ignore[union-attr]


def test_yaml11_booleans_are_spelled_true_false_and_keep_their_meaning() -> None:
    text = HEADER + "id: x\nkind: claim\nname: n\nwhen: {var: causal, eq: yes}\n"
    assert "when: {var: causal, eq: true}" in canonical(text, CLAIM)


def test_flow_strings_with_colons_are_quoted_block_ones_are_not() -> None:
    text = HEADER + "id: x\nkind: claim\nname: see https://a.b/c\nsources:\n- {type: doc, url: https://a.b/c}\n"
    out = canonical(text, CLAIM)
    assert "name: see https://a.b/c\n" in out
    assert "- {type: doc, url: 'https://a.b/c'}\n" in out


def test_multiline_strings_become_literal_blocks() -> None:
    text = HEADER + 'id: x\nkind: claim\nname: n\nnotes: "line one\\nline two\\n"\n'
    assert canonical(text, CLAIM).endswith("notes: |\n  line one\n  line two\n")


def test_unknown_keys_keep_their_place_after_known_ones() -> None:
    text = HEADER + "zeta: 1\nid: x\nalpha: 2\nkind: claim\nname: n\n"
    assert canonical(text, CLAIM) == HEADER + "id: x\nkind: claim\nname: n\nzeta: 1\nalpha: 2\n"


def test_nested_models_follow_their_declared_order() -> None:
    text = HEADER + ("id: x\nkind: claim\nname: n\nrequires:\n  any:\n  - {le: 256, var: head_dim}\n"
                     "  - not: {in: [sm90], var: sm}\nverification: {evidence: [], status: unverified}\n")
    out = canonical(text, CLAIM)
    assert "  - {var: head_dim, le: 256}\n  - not: {var: sm, in: [sm90]}\n" in out
    assert "verification: {status: unverified, evidence: []}\n" in out


def test_numbers_are_written_in_decimal() -> None:
    path = Path("/kb/records/accelerators/g.yaml")
    text = ("id: g\nkind: accelerator\nname: G\nvendor: nvidia\narchitecture: sm90\n"
            "l2_mb: {value: 5.0e+1, basis: recorded}\ntdp_w: {value: 0x2bc, basis: recorded}\n")
    out = canonical(text, path)
    assert "l2_mb: {value: 50.0," in out and "tdp_w: {value: 700," in out


@pytest.mark.parametrize("bad", ["id: [unclosed\n", "- a list\n", "id: x\nkind: nope\nname: n\n", "",
                                 "a: !!python/name:os.system x\n"])
def test_unformattable_input_raises_a_located_error(bad: str) -> None:
    with pytest.raises(InvalidRecordError, match="cannot format"):
        canonical(bad, CLAIM)


def test_canonical_records_are_left_byte_for_byte(tmp_path: Path) -> None:
    from kbtool.fmt.run import format_paths

    p = write(tmp_path, "records/claims/x.yaml", WANT)
    before = p.stat().st_mtime_ns
    report = format_paths(tmp_path / "records")
    assert [r.status for r in report.results] == ["ok"]
    assert p.read_text() == WANT and p.stat().st_mtime_ns == before


def test_fmt_rewrites_and_check_only_reports(tmp_path: Path) -> None:
    from kbtool.fmt.run import format_paths

    p = write(tmp_path, "records/claims/x.yaml", MESSY)
    checked = format_paths(tmp_path / "records", check=True)
    assert checked.exit_code == 1 and p.read_text() == MESSY
    assert checked.results[0].diff.startswith("--- a/records/claims/x.yaml\n+++ b/records/claims/x.yaml\n")
    done = format_paths(tmp_path / "records")
    assert done.exit_code == 0 and p.read_text() == WANT


def test_evidence_is_never_reformatted(tmp_path: Path) -> None:
    from kbtool.fmt.run import format_paths

    ev = "kind: evidence\nid: e\nname: run\n"
    p = write(tmp_path, "records/evidence/e.yaml", ev)
    report = format_paths(tmp_path / "records")
    assert [r.status for r in report.results] == ["skipped"]
    assert p.read_text() == ev
    explicit = format_paths(tmp_path / "records", [p])
    assert [r.status for r in explicit.results] == ["skipped"] and p.read_text() == ev
