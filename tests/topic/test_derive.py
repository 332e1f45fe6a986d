"""Derived verification: shares, the confidence formula of docs/topics.md, status and level."""

from __future__ import annotations

import pytest

from kbtool.kb import KB
from kbtool.model import Claim
from kbtool.model.topic import Statement, Topic
from kbtool.topic.derive import PRIOR, WEIGHTS, derive, level_of, statement_status
from tests.topic.helpers import claim, topic


def _kb(*statuses: str) -> KB:
    return KB.from_records([Claim.model_validate(claim(f"c{i}", s)) for i, s in enumerate(statuses)])


def _topic(links: list[list[str]]) -> Topic:
    return Topic.model_validate(topic(statements=[{"text": f"s{i}", "claims": c} for i, c in enumerate(links)]))


def test_weights_are_the_documented_ones() -> None:
    assert WEIGHTS == {"verified": 1.0, "unverified": 0.5, "untestable": 0.5, "unlinked": 0.5, "disputed": 0.25,
                       "refuted": 0.0}
    assert PRIOR == 0.5


def test_confidence_is_the_mean_weight_over_claims_and_unlinked_statements() -> None:
    kb = _kb("verified", "verified", "disputed", "unverified")
    d = derive(_topic([["c0", "c1"], ["c2"], ["c3", "c0"], []]), kb)
    # distinct claims c0 c1 c2 c3 + one unlinked statement: (1 + 1 + 0.25 + 0.5 + 0.5) / 5
    assert d.units == 5 and d.confidence == 0.65
    assert d.shares()["verified"] == 0.5 and d.shares()["disputed"] == 0.25
    assert d.status == "disputed" and d.level == "medium"


def test_a_claim_linked_twice_counts_once() -> None:
    kb = _kb("refuted", "verified")
    assert derive(_topic([["c0"], ["c0"], ["c1"]]), kb).confidence == 0.5


def test_refuted_claim_sets_the_status() -> None:
    d = derive(_topic([["c0"], ["c1"]]), _kb("refuted", "verified"))
    assert d.status == "partly-refuted" and [c.id for c in d.refuted] == ["c0"]
    assert derive(_topic([["c0"]]), _kb("refuted")).status == "refuted"


@pytest.mark.parametrize(("statuses", "want"), [
    (["verified", "verified"], "verified"), (["verified", "unverified"], "partly-verified"),
    (["untestable"], "untestable"), (["unverified", "untestable"], "unverified"),
    (["disputed", "verified"], "disputed"),
])
def test_status_rules(statuses: list[str], want: str) -> None:
    links = [[f"c{i}"] for i in range(len(statuses))]
    assert derive(_topic(links), _kb(*statuses)).status == want


def test_unlinked_statement_keeps_an_all_verified_topic_partly_verified() -> None:
    d = derive(_topic([["c0"], []]), _kb("verified"))
    assert d.status == "partly-verified" and d.confidence == 0.75


def test_missing_claim_counts_as_unverified() -> None:
    d = derive(_topic([["nope"]]), KB())
    assert d.counts == {"missing": 1} and d.confidence == 0.5 and d.status == "unverified"


def test_empty_topic_has_the_prior() -> None:
    d = derive(Topic.model_validate(topic()), KB())
    assert (d.confidence, d.status, d.level) == (PRIOR, "unverified", "low")


def test_levels() -> None:
    assert [level_of(x) for x in (0.85, 0.84, 0.6, 0.59)] == ["high", "medium", "medium", "low"]


def test_statement_mark_is_the_worst_claim() -> None:
    from kbtool.topic.derive import ClaimState

    assert statement_status([]) == "unlinked"
    assert statement_status([ClaimState("a", "verified"), ClaimState("b", "refuted")]) == "refuted"
    assert statement_status([ClaimState("a", "verified"), ClaimState("b", "disputed")]) == "disputed"


def test_statement_model_keeps_origin() -> None:
    assert Statement(text="x", origin="notes").origin == "notes"
