"""Probe coverage per architecture: which claims are in scope there, and which carry a verdict there."""

from __future__ import annotations

from typing import Any

from kbtool.kb import KB
from kbtool.model import MODELS, Record
from kbtool.views.coverage import coverage, in_scope

SEED = [{"type": "seed", "seed": "s.txt"}]


def rec(**kw: Any) -> Record:
    return MODELS[kw["kind"]].model_validate({"name": kw["id"], "sources": SEED, **kw})


def arch(sm: str, cc: str, vendor: str = "nvidia") -> Record:
    return rec(id=sm, kind="architecture", vendor=vendor, compute_capability=cc, family="f")


def claim(cid: str, **kw: Any) -> Record:
    return rec(id=cid, kind="claim", subject=kw.pop("subject", "k"), statement="s", effect="reject",
               reason={"code": "X", "message": "m"}, **kw)


def kb() -> KB:
    verified_sm90 = {"status": "verified", "evidence": ["e"],
                     "verdicts": [{"scope": {"sm": "sm90"}, "status": "verified", "evidence": ["e"]}]}
    verified_sm100 = {"status": "verified", "evidence": ["e"],
                      "verdicts": [{"scope": {"sm": "sm100"}, "status": "verified", "evidence": ["e"]}]}
    engine = {"status": "verified", "evidence": ["e"],
              "verdicts": [{"scope": {"libraries": {"vllm": "0.33.0"}}, "status": "verified", "evidence": ["e"]}]}
    return KB.from_records([
        rec(id="k", kind="kernel", library="lib", phases=["decode"]),
        arch("sm90", "9.0"), arch("sm100", "10.0"), arch("cdna3", "9.4", "amd"),
        rec(id="h100", kind="accelerator", vendor="nvidia", architecture="sm90"),
        claim("plain"),
        claim("needs-sm100", requires={"var": "cc", "ge": 10.0}),  # its sm90 test is a refusal: in scope
        claim("when-sm100", when={"var": "sm", "eq": "sm100"}),
        claim("when-amd", when={"var": "vendor", "eq": "amd"}),
        claim("archs-sm80", archs=["sm100"]),
        claim("about-sm100", subject="sm100"),
        claim("about-h100", subject="h100"),
        claim("settled", verification=verified_sm90),
        claim("settled-elsewhere", verification=verified_sm100),
        claim("engine", verification=engine),
        claim("no-wheel", verification={"status": "untestable", "reason": "no wheels"}),
    ])


def test_in_scope_reads_subject_archs_and_when() -> None:
    k = kb()
    sm90 = k.get("sm90")
    assert sm90 is not None
    inside = {c.id for c in k.of_kind("claim") if in_scope(c, sm90, k)}  # type: ignore[arg-type]
    assert inside == {"plain", "needs-sm100", "about-h100", "settled", "settled-elsewhere", "engine", "no-wheel"}


def test_coverage_counts_verdicts_there_or_for_any_architecture() -> None:
    cov = coverage(kb(), "sm90")
    assert cov["in_scope"] == 7
    assert cov["covered"] == {"untestable": 1, "verified": 2}  # settled (sm90), engine (any sm); no-wheel
    assert [u["claim"] for u in cov["uncovered"]] == ["about-h100", "needs-sm100", "plain", "settled-elsewhere"]


def test_shipped_coverage_is_reported_for_the_probed_architecture(shipped: KB) -> None:
    from kbtool.views.stats import stats

    d = stats(shipped)
    arches = [c["arch"] for c in d["coverage"]]
    assert "sm90" in arches
    sm90 = d["coverage"][arches.index("sm90")]
    assert sm90["in_scope"] == sum(sm90["covered"].values()) + len(sm90["uncovered"])
