"""kb validate's KB306: per-scope verdicts and version-scope events agree with the evidence (judged again)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbtool.checks.consistency import find_scope_disagreement
from kbtool.checks.verification import find_evidence_disagreement
from kbtool.kb import KB
from kbtool.model import Claim
from kbtool.store.records import load_tree

ROOT = Path(__file__).resolve().parents[2] / "records"
FP8 = "flashinfer-fp8-kv-head-dim-512-needs-sm100"


def tree(vllm_selector: bool = False) -> list:  # type: ignore[type-arg]
    """Claims, kernels, engine backends and evidence; the vLLM selector's grids (the slow judge, about claims these
    tests do not edit) only when asked."""
    evidence = [p for p in (ROOT / "evidence").glob("*.yaml") if vllm_selector or "vllm-selector" not in p.name]
    folders = [ROOT / "claims", ROOT / "kernels", ROOT / "engine-backends"]  # what the judges' cache keys read
    return [x.record for x in load_tree(ROOT, [*folders, *evidence]).loaded]


def with_claim(records: list, cid: str, **update: object) -> KB:  # type: ignore[type-arg]
    out = []
    for r in records:
        if isinstance(r, Claim) and r.id == cid:
            data = r.model_dump(mode="json", exclude_defaults=True, by_alias=True)
            data.update(update)
            r = Claim.model_validate(data)
        out.append(r)
    return KB.from_records(out)


@pytest.mark.usefixtures("shipped_verdicts")
def test_the_recorded_tree_agrees() -> None:
    kb = KB.from_records(tree(vllm_selector=True))
    assert find_scope_disagreement(kb) == []
    assert find_evidence_disagreement(kb) == []


def test_the_fixed_bound_came_from_the_first_release_that_builds_it() -> None:
    # the FlashInfer sweep on the H200: 0.7.0.post1 (head-dim-3) still refuses, 0.7.1 (head-dim-4) builds
    (claim,) = [r for r in tree() if isinstance(r, Claim) and r.id == FP8]
    (r,) = claim.scope
    assert r.fixed == "0.7.1"
    assert r.evidence == ["2026-12-02-nvidia-h200-sxm-flashinfer-head-dim-4",
                          "2026-12-01-nvidia-h200-sxm-flashinfer-head-dim"]


def test_a_bound_the_evidence_does_not_support_is_found() -> None:
    records = tree()
    wrong = [{"library": "flashinfer", "fixed": "0.6.18",  # the 0.6.18 runs confirmed the gate: not fixed there
              "evidence": ["2026-11-30-nvidia-h200-sxm-flashinfer-head-dim-3"]}]
    found = find_scope_disagreement(with_claim(records, FP8, scope=wrong))
    assert any("fixed 0.6.18 cites" in f.message for f in found)


def test_a_verdict_outside_the_version_scope_is_found() -> None:
    records = tree()
    (claim,) = [r for r in records if isinstance(r, Claim) and r.id == FP8]
    verification = claim.verification.model_dump(mode="json", exclude_defaults=True)
    verification["verdicts"][0]["scope"]["libraries"]["flashinfer"] = "0.7.2.post1"
    found = find_scope_disagreement(with_claim(records, FP8, verification=verification))
    assert any("outside the claim's version scope" in f.message for f in found)


def test_a_verdict_the_evidence_does_not_say_is_found() -> None:
    records = tree()
    (claim,) = [r for r in records if isinstance(r, Claim) and r.id == "flashinfer-head-dim-256-512-unsupported"]
    verification = claim.verification.model_dump(mode="json", exclude_defaults=True)
    verification["verdicts"][0]["status"] = "verified"
    found = find_scope_disagreement(with_claim(records, claim.id, verification=verification))
    assert any("verdict 'verified' but evidence" in f.message for f in found)


CUTLASS = "cutlass-mla-decode-head-dim-576"


def cutlass_tree(*selectors: str) -> list:  # type: ignore[type-arg]
    """The CUTLASS claim (no other), the kernels and the named releases' selector grids (to keep the judge quick)."""
    extra = [ROOT / "evidence" / f"2026-12-02-no-gpu-vllm-{s.replace('.', '-')}-vllm-selector.yaml" for s in selectors]
    loaded = [x.record for x in load_tree(ROOT, [ROOT / "claims" / f"{CUTLASS}.yaml", ROOT / "kernels", *extra]).loaded]
    return loaded


def test_the_release_past_a_bound_may_be_cited() -> None:
    # 0.29.0 holds, 0.30.0 fails: outside today's range 0.30.0 is judged only as recorded (contradicted)
    scope = [{"library": "vllm", "last_affected": "0.29.0",
              "evidence": ["2026-12-02-no-gpu-vllm-0-29-0-vllm-selector",
                           "2026-12-02-no-gpu-vllm-0-30-0-vllm-selector"]}]
    found = find_scope_disagreement(with_claim(cutlass_tree("0.29.0", "0.30.0"), CUTLASS, scope=scope))
    assert [f.message for f in found if f.path.startswith("$.scope")] == []
    assert found == [] or all("verdicts" in f.path or "verification" in f.path for f in found)


def test_a_release_past_a_bound_that_held_is_found() -> None:
    # 0.29.0 confirmed the claim, so a range ending at 0.22.0 may not cite it as the other side
    scope = [{"library": "vllm", "last_affected": "0.22.0",
              "evidence": ["2026-12-02-no-gpu-vllm-0-29-0-vllm-selector"]}]
    found = find_scope_disagreement(with_claim(cutlass_tree("0.29.0"), CUTLASS, scope=scope))
    assert any(f.path == "$.scope.0.evidence.0" for f in found)
