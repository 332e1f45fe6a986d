"""kb show and kb list: library functions on the fixture KB, the CLI on the shipped KB."""

from __future__ import annotations

import json

import pytest

from kbtool.errors import NotFoundError, UsageError
from kbtool.kb import KB
from kbtool.views.listing import list_records, lookup, matches, parse_where
from kbtool.views.show import show_data
from tests.util import DATA, run_kb

FIX = str(DATA / "kb_fixture")


def test_show_claim_resolves_references_and_verification(fx: KB) -> None:
    d = show_data(fx, "k-prefill-no-fp8")
    assert d["kind"] == "claim" and d["file"].endswith("k-prefill-no-fp8.yaml")
    assert {"rel": "subject", "id": "k-prefill", "kind": "kernel", "name": "k-prefill", "exists": True} \
        in d["references"]
    ev = next(r for r in d["references"] if r["rel"] == "evidence")
    assert ev == {"rel": "evidence", "id": "ev-fixture", "kind": None, "name": None, "exists": False}
    assert d["verification"]["status"] == "refuted"
    assert d["evidence"] == [{"id": "ev-fixture", "missing": True}]


def test_show_kernel_lists_claims_and_incoming_edges(fx: KB) -> None:
    d = show_data(fx, "k-gqa")
    ids = {c["id"] for c in d["claims"]}
    assert {"k-gqa-head-dim", "k-gqa-requires-sm90", "k-gqa-old-bug"} <= ids
    assert {"rel": "subject", "id": "k-gqa-head-dim", "kind": "claim"} in d["referenced_by"]
    assert any(r["id"] == "eng-gqa" and r["rel"] == "runs" for r in d["referenced_by"])


def test_show_unknown_id_suggests(fx: KB) -> None:
    with pytest.raises(NotFoundError) as e:
        show_data(fx, "k-gqa-head")
    assert "k-gqa-head-dim" in str(e.value)


def test_lookup_dotted_facts_and_lists() -> None:
    data = {"a": {"b": {"value": 3, "basis": "recorded"}}, "xs": [{"k": "p"}, {"k": "q"}], "l": ["x", "y"]}
    assert lookup(data, "a.b") == 3
    assert lookup(data, "xs.k") == ["p", "q"]
    assert lookup(data, "xs.1.k") == "q"
    assert matches(lookup(data, "l"), "Y")
    assert not matches(lookup(data, "a.c"), "3")
    assert matches(3, "3.0") and not matches(3, "x")


def test_list_kind_and_where(fx: KB) -> None:
    rows = list_records(fx, "claims", ["verification.status=refuted"])
    assert [r["id"] for r in rows] == ["k-prefill-no-fp8"]
    assert rows[0]["verification.status"] == "refuted"
    subj = list_records(fx, "claim", ["subject=k-gqa", "effect!=caveat"])
    assert subj and all(r["id"].startswith("k-gqa") for r in subj)
    assert "k-gqa-fp8-long-ctx" not in {r["id"] for r in subj}
    assert len(list_records(fx)) == len(fx)
    assert list_records(fx, "kernel", ["phases=decode"]) != list_records(fx, "kernel")


def test_list_bad_input() -> None:
    with pytest.raises(UsageError):
        parse_where("no-operator")
    with pytest.raises(UsageError):
        list_records(KB(), "widget")


def test_cli_show_and_list() -> None:
    r = run_kb("show", "fa4-requires-blackwell")
    assert r.code == 0, r.err
    assert "verification: refuted" in r.out and "2026-11-30-nvidia-h200-sxm-fa4-arch" in r.out
    assert "subject -> flash-attention-4" in r.out
    j = run_kb("show", "h200", "--json")
    assert j.code == 0 and json.loads(j.out)["id"] == "nvidia-h200-sxm"
    topic = run_kb("show", "long-context-attention-kernel-matrix")
    assert topic.code == 0 and "REFUTED" in topic.out  # the topic page is still rendered by render/topic.py
    lst = run_kb("list", "--kb", FIX, "--kind", "kernel", "--json")
    assert sorted(x["id"] for x in json.loads(lst.out)) == ["k-free", "k-gqa", "k-mla", "k-prefill"]
    bad = run_kb("list", "--where", "oops")
    assert bad.code == 2 and "FIELD=VALUE" in bad.err
    missing = run_kb("show", "no-such-thing-at-all")
    assert missing.code == 2 and "Traceback" not in missing.err
