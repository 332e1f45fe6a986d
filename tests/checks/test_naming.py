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
    """The 99 claims named for vLLM 0.33.0 (96, and 3 more once their ranges reached 0.34.0) and the 13 named
    for 0.24.0 whose range spans more releases carry neutral ids (the ones left hold for their release only);
    every renamed claim's ranges cite evidence and its statement names no release as its own."""
    from kbtool.kb import load_kb
    from tests.util import RECORDS

    kb = load_kb(RECORDS)[0]
    assert find_release_named_claims(kb) == []
    renamed = [c for c in kb.of_kind("claim", Claim) if c.formerly and c.id.startswith("vllm-")]
    assert sum(c.formerly[0].endswith("-0.33.0") for c in renamed) == 99
    assert sum(c.formerly[0].endswith("-0.24.0") for c in renamed) == 13
    assert all(r.evidence for c in renamed for r in c.scope), "a renamed claim's range cites no evidence"
    assert not [c.id for c in renamed if re.search(r"\b0\.\d+\.\d+'s\b", c.statement)]


# SGLang claims once named for 0.5.17 (issue 46): old id -> the claim that holds it now. Two pairs were one
# behaviour recorded twice (a 0.5.17 claim and a 0.5.23 claim with the same check and message) and are merged; where
# the release-less id was another behaviour's, the renamed claim names its own (what 0.5.17-0.5.19 accepted).
SGLANG_RENAMED = {
    "sglang-fp4-kv-fa4-mha-decode-0.5.17": "sglang-fp4-kv-fa4-mha-decode",
    "sglang-fp4-kv-mha-backends-0.5.17": "sglang-fp4-kv-mha-backends",
    "sglang-fp4-kv-fa4-mla-decode-0.5.17": "sglang-fp4-kv-fa4-mla-decode-with-cutlass-mla",
    "sglang-fp4-kv-mla-backends-0.5.17": "sglang-fp4-kv-mla-backends-with-cutlass-mla",
    "sglang-exaone4-backends-0.5.17": "sglang-exaone4-backends",
    "sglang-intel-xpu-mla-decode-only-0.5.17": "sglang-intel-xpu-mla-decode-only",
    "sglang-nemotron-h-no-triton-0.5.17": "sglang-nemotron-h-no-triton",
    "sglang-tokenspeed-mla-blackwell-0.5.17": "sglang-tokenspeed-mla-blackwell",
    "sglang-tokenspeed-mla-fp8-kv-0.5.17": "sglang-tokenspeed-mla-fp8-kv",
    "sglang-trtllm-mha-prefill-sm100-0.5.17": "sglang-trtllm-mha-prefill-sm100",
    "sglang-dsa-tilelang-fp8-rocm-only-0.5.17": "sglang-dsa-tilelang-fp8-rocm-only-with-tilelang-hint",
    "sglang-trtllm-mla-kv-dtype-0.5.17": "sglang-trtllm-mla-kv-dtype-with-fp4",
}


def test_sglang_claims_named_for_a_release_are_renamed_and_their_old_ids_resolve() -> None:
    """No SGLang claim's id, name or statement names a release its range outgrows; each old id (named by the evidence
    of its day, which is never edited) finds the claim that holds it now, and the merged claims keep the evidence
    both halves had (the 0.5.17 evidence of the 0.5.23-named claim and the 0.5.18-0.5.20 evidence of the other)."""
    from kbtool.kb import load_kb
    from tests.util import RECORDS

    kb = load_kb(RECORDS)[0]
    for old, new in SGLANG_RENAMED.items():
        assert kb.resolve(old).id == new, old
        assert kb.renamed[old] == new
    sglang = [c for c in kb.of_kind("claim", Claim) if c.id.startswith("sglang-")]
    spans = [c for c in sglang if any(r.introduced != r.last_affected or r.fixed for r in c.scope)]
    named = [c.id for c in spans if re.search(r"SGLang\s+0\.5\.\d+|\(SGLang 0\.5", f"{c.name} {c.statement}")]
    assert named == [], "statements that name one release of a range spanning more"
    for merged in ("sglang-fp4-kv-fa4-mha-decode", "sglang-fp4-kv-mha-backends"):
        c = kb.resolve(merged)
        assert [(r.introduced, r.last_affected) for r in c.scope] == [("0.5.17", "0.5.23")]
        both = {"2026-12-02-no-gpu-sglang-0-5-17-sglang-resolve", "2026-12-06-no-gpu-sglang-0-5-20-sglang-resolve"}
        assert both <= set(c.scope[0].evidence)
