"""Topic checks: KB501 dangling [[id]] with file:line, KB502 confidence, KB503 link kinds, KB504, KB505."""

from __future__ import annotations

from pathlib import Path

from kbtool.checks.topics import (
    find_confidence_mismatch,
    find_dangling_xrefs,
    find_fat_stubs,
    find_unlinked,
    find_wrong_kinds,
)
from tests.topic.helpers import claim, load, topic, tree
from tests.util import RECORDS, run_kb


def test_dangling_xref_is_reported_with_its_line(tmp_path: Path) -> None:
    notes = "First line.\nSee [[known-stub]] and then\n[[nowhere-record]] for more."
    root = tree(tmp_path, topic("t", notes=notes), topic("known-stub", external=True))
    found = find_dangling_xrefs(load(root))
    assert [f.message for f in found] == ["[[nowhere-record]] names no record"]
    f = found[0]
    text = (root / "topics" / "t.yaml").read_text().splitlines()
    assert f.file is not None and f.file.endswith("topics/t.yaml") and f.path == "$.notes"
    assert f.line is not None and "[[nowhere-record]]" in text[f.line - 1]


def test_xref_by_alias_or_source_id_resolves(tmp_path: Path) -> None:
    root = tree(tmp_path, topic("t", workarounds=["see [[Other-Alias]] and [[flops/x-y]]"]),
                topic("o", aliases=["other-alias"], original_id="flops/x-y"))
    assert find_dangling_xrefs(load(root)) == []


def test_stated_confidence_that_disagrees_is_an_error(tmp_path: Path) -> None:
    t = topic("t", statements=[{"text": "s", "claims": ["c"]}],
              verification={"status": "verified", "level": "high", "confidence": 0.9})
    found = find_confidence_mismatch(load(tree(tmp_path, t, claim("c", "disputed"))))
    assert len(found) == 1 and found[0].severity == "error" and found[0].path == "$.verification"
    assert "confidence 0.9 but derived 0.25" in found[0].message and "disputed" in found[0].message


def test_stated_confidence_that_agrees_passes(tmp_path: Path) -> None:
    t = topic("t", statements=[{"text": "s", "claims": ["c"]}, {"text": "u", "claims": []}],
              verification={"status": "disputed", "level": "low", "confidence": 0.38})
    assert find_confidence_mismatch(load(tree(tmp_path, t, claim("c", "disputed")))) == []


def test_source_confidence_disagreeing_is_a_warning(tmp_path: Path) -> None:
    t = topic("t", statements=[{"text": "s", "claims": ["c"]}], stated={"status": "verified", "confidence": 0.82})
    found = find_confidence_mismatch(load(tree(tmp_path, t, claim("c"))))
    assert [(f.severity, f.path) for f in found] == [("warning", "$.stated.confidence")]


def test_links_to_the_wrong_kind(tmp_path: Path) -> None:
    t = topic("t", statements=[{"text": "s", "claims": ["other"]}], affected_accelerators=["c"])
    found = find_wrong_kinds(load(tree(tmp_path, t, topic("other"), claim("c"))))
    assert sorted(f.path for f in found) == ["$.affected_accelerators[0]", "$.statements[0].claims[0]"]


def test_unlinked_statement_warns_and_stub_stays_a_stub(tmp_path: Path) -> None:
    root = tree(tmp_path, topic("t", statements=[{"text": "s"}]),
                topic("x", external=True, statements=[{"text": "s", "claims": []}]))
    kb = load(root)
    assert {(f.code, f.severity) for f in find_unlinked(kb)} == {("KB504", "warning")}
    assert [f.path for f in find_fat_stubs(kb)] == ["$.statements"]


def test_real_topics_validate_and_link_only_existing_claims() -> None:
    r = run_kb("validate", str(RECORDS / "topics"), "--json")
    assert r.code == 0, r.out
    import json

    findings = json.loads(r.out)["findings"]
    assert not [f for f in findings if f["severity"] == "error"]
    assert not [f for f in findings if f["code"] in ("KB202", "KB501", "KB503")]
