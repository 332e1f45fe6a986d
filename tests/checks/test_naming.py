"""KB322 (kbtool/checks/naming.py): a claim whose id names a release while its range spans others is a warning with
the fix; renamed with the old id under `formerly`, it is not, and the old id still finds it (issue 46)."""

from __future__ import annotations

import re
from typing import Any

from kbtool.checks.naming import find_release_named_claims, release_named
from kbtool.kb import KB
from kbtool.model import Claim
from tests.checks.test_references import SRC, arch


def claim(id_: str, scope: list[dict[str, Any]], formerly: list[str] | None = None) -> Claim:
    return Claim.model_validate({"id": id_, "kind": "claim", "name": id_, "subject": "a", "statement": "s",
                                 "effect": "reject", "reason": {"code": "X", "message": "m"}, "sources": SRC,
                                 "scope": scope, "formerly": formerly or []})


ONE = [{"library": "vllm", "introduced": "0.33.0", "last_affected": "0.33.0"}]
WIDER = [{"library": "vllm", "introduced": "0.19.1", "last_affected": "0.34.0"}]


def test_an_id_naming_one_release_of_several_is_a_warning() -> None:
    kb = KB.from_records([arch("a"), claim("vllm-x-block-size-0.33.0", WIDER), claim("vllm-y-0.33.0", ONE),
                          claim("vllm-z", WIDER), claim("vllm-w-0.33.0", [])])
    [f] = find_release_named_claims(kb)
    assert (f.code, f.severity, f.path) == ("KB322", "warning", "$.id")
    assert "'vllm-x-block-size-0.33.0' names release 0.33.0" in f.message and "vllm 0.19.1 to 0.34.0" in f.message
    assert f.fix is not None and "formerly" in f.fix
    fixed = claim("vllm-y-0.33.0", [*ONE, {"library": "vllm", "introduced": "0.20.0", "fixed": "0.21.0"}])
    assert release_named(fixed) == "0.33.0"  # a second range is more than the release too


def test_renamed_it_is_quiet_and_the_old_id_finds_it() -> None:
    kb = KB.from_records([arch("a"), claim("vllm-x-block-multiple-of-16", WIDER,
                                           formerly=["vllm-x-block-size-0.33.0"])])
    assert find_release_named_claims(kb) == []
    assert kb.resolve("vllm-x-block-size-0.33.0").id == "vllm-x-block-multiple-of-16"


def test_no_shipped_vllm_claim_named_for_a_release_spans_more() -> None:
    """The 96 claims named for vLLM 0.33.0 and the 13 named for 0.24.0 whose range spans more releases carry
    neutral ids (the ones left hold for their release only); every renamed claim's ranges cite evidence and its
    statement names no release as its own. KB322 reports only SGLang claims named for 0.5.17 (not renamed yet)."""
    from kbtool.kb import load_kb
    from tests.util import RECORDS

    kb = load_kb(RECORDS)[0]
    assert all(f.message.startswith("claim id 'sglang-") for f in find_release_named_claims(kb))
    renamed = [c for c in kb.of_kind("claim", Claim) if c.formerly]
    assert sum(c.formerly[0].endswith("-0.33.0") for c in renamed) == 96
    assert sum(c.formerly[0].endswith("-0.24.0") for c in renamed) == 13
    assert all(r.evidence for c in renamed for r in c.scope), "a renamed claim's range cites no evidence"
    assert not [c.id for c in renamed if re.search(r"\b0\.\d+\.\d+'s\b", c.statement)]
