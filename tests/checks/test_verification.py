"""kbtool/checks/verification.py: KB302, KB304, KB305 on the fixture KB, each with one record broken."""

from __future__ import annotations

from kbtool.checks.verification import (
    find_disputes_without_sides,
    find_status_without_evidence,
    find_untestable_without_reason,
)
from kbtool.kb import KB
from tests.checks.fixture import kb_with, records

CLAIM = "eng-gqa-block"


def _new(found: list) -> list:  # type: ignore[type-arg]
    """Findings the edit added (the fixture itself cites evidence it does not hold, on other claims)."""
    base = {(f.code, f.message) for f in find_status_without_evidence(KB.from_records(list(records())))}
    return [f for f in found if (f.code, f.message) not in base]


def test_the_fixture_is_clean_but_for_its_missing_evidence() -> None:
    kb = KB.from_records(list(records()))
    assert find_disputes_without_sides(kb) == find_untestable_without_reason(kb) == []
    assert {f.message for f in find_status_without_evidence(kb)} == {"evidence 'ev-fixture' is not an evidence record"}


def test_verified_without_evidence() -> None:
    (f,) = _new(find_status_without_evidence(kb_with(CLAIM, verification={"status": "verified"})))
    assert (f.code, f.message) == ("KB302", "status 'verified' without evidence")
    assert CLAIM in (f.fix or "")


def test_evidence_that_is_no_evidence_record() -> None:
    found = _new(find_status_without_evidence(kb_with(CLAIM, verification={"status": "verified", "evidence": [
        "k-gqa-cuda"]})))
    assert [f.message for f in found] == ["evidence 'k-gqa-cuda' is not an evidence record"]


def test_disputed_with_one_side() -> None:
    (f,) = find_disputes_without_sides(kb_with(CLAIM, verification={"status": "disputed"}))
    assert (f.code, f.message) == ("KB304", "disputed with 0 side(s)")


def test_untestable_without_a_reason() -> None:
    (f,) = find_untestable_without_reason(kb_with(CLAIM, verification={"status": "untestable"}))
    assert (f.code, f.message) == ("KB305", "untestable without a reason")
    assert find_untestable_without_reason(kb_with(CLAIM, verification={"status": "untestable",
                                                                       "reason": "no wheel"})) == []


def test_notes_that_call_a_verified_claim_unsettled() -> None:
    from kbtool.checks.verification import find_notes_contradicting_status

    assert find_notes_contradicting_status(KB.from_records(list(records()))) == []
    kb = kb_with(CLAIM, verification={"status": "verified", "evidence": ["ev-fixture"]},
                 notes="The status stays unverified until a probe run writes one.")
    (f,) = find_notes_contradicting_status(kb)
    assert f.code == "KB307" and "unverified until" in f.message
    kb = kb_with(CLAIM, verification={"status": "unverified"}, notes="unverified until a probe run writes one")
    assert find_notes_contradicting_status(kb) == []
