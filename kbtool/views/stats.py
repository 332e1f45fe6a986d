"""`kb stats`: counts per kind, verification, fact basis, primary sources, evidence per GPU, stale scopes and
probe coverage per probed architecture."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel

from kbtool.kb import KB
from kbtool.model import Claim, Evidence, Kernel, Measurement
from kbtool.model.common import PRIMARY_SOURCE_TYPES, Fact, VersionRange
from kbtool.solve.conditions import compare_versions
from kbtool.views.coverage import coverage, probed_archs


def _facts(obj: Any, out: Counter[str]) -> None:
    """Count every Fact inside a model, by basis (walks nested models, lists and dicts)."""
    if isinstance(obj, Fact):
        out[str(obj.basis)] += 1
    elif isinstance(obj, BaseModel):
        for name in type(obj).model_fields:
            _facts(getattr(obj, name), out)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _facts(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _facts(x, out)


def _share(counts: dict[str, int]) -> dict[str, dict[str, float | int]]:
    total = sum(counts.values())
    return {k: {"count": v, "share": round(v / total, 4) if total else 0.0} for k, v in counts.items()}


def _closed_before(r: VersionRange, latest: str) -> bool:
    """True when the range ends before `latest`: fixed <= latest, or last_affected < latest."""
    if r.fixed:
        return compare_versions(r.fixed, latest) <= 0
    if r.last_affected:
        return compare_versions(r.last_affected, latest) < 0
    return False


def stale_scopes(kb: KB) -> list[dict[str, Any]]:
    """Claims whose every range for a library ends before that library's newest recorded release."""
    latest: dict[str, str] = {}
    for k in kb.of_kind("kernel", Kernel):
        if k.latest_version and (k.library not in latest or compare_versions(k.latest_version,
                                                                             latest[k.library]) > 0):
            latest[k.library] = k.latest_version
    out = []
    for c in sorted(kb.of_kind("claim", Claim), key=lambda c: c.id):
        by_lib: dict[str, list[VersionRange]] = {}
        for r in c.scope:
            by_lib.setdefault(r.library, []).append(r)
        for lib, ranges in sorted(by_lib.items()):
            if lib in latest and all(_closed_before(r, latest[lib]) for r in ranges):
                ends = [f"< {r.fixed}" if r.fixed else f"<= {r.last_affected}" for r in ranges]
                out.append({"claim": c.id, "library": lib, "scope": ", ".join(ends), "latest": latest[lib],
                            "status": c.verification.status})
    return out


def stats(kb: KB) -> dict[str, Any]:
    kinds = Counter(r.kind for r in kb)
    claims = kb.of_kind("claim", Claim)
    status = Counter(str(c.verification.status) for c in claims)
    basis: Counter[str] = Counter()
    for r in kb:
        _facts(r, basis)
    measured: Counter[str] = Counter()  # figures (rows), not records: a bench run is one record of many
    for m in kb.of_kind("measurement", Measurement):
        measured[str(m.basis)] += len(m.rows)
    primary = [c.id for c in claims if any(str(s.type) in PRIMARY_SOURCE_TYPES for s in c.sources)]
    per_gpu: Counter[str] = Counter()
    for e in kb.of_kind("evidence", Evidence):
        per_gpu[e.environment.accelerator or e.environment.gpu] += 1
    n = len(claims)
    return {
        "records": len(kb),
        "kinds": dict(sorted(kinds.items())),
        "claims_by_status": dict(sorted(status.items())),
        "facts_by_basis": _share(dict(sorted(basis.items()))),
        "measurements_by_basis": _share(dict(sorted(measured.items()))),
        "claims_with_primary_source": {"count": len(primary), "of": n,
                                       "share": round(len(primary) / n, 4) if n else 0.0,
                                       "without": sorted(c.id for c in claims if c.id not in set(primary))},
        "evidence_per_gpu": dict(sorted(per_gpu.items())),
        "stale_scopes": stale_scopes(kb),
        "coverage": [coverage(kb, sm) for sm in probed_archs(kb)],
    }
