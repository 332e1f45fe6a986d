"""kb stats on a built KB (exact numbers) and on the shipped KB (consistency)."""

from __future__ import annotations

import json
from typing import Any

from kbtool.kb import KB
from kbtool.model import MODELS, Record
from kbtool.views.stats import stats
from tests.util import run_kb

SEED = [{"type": "seed", "seed": "s.txt"}]
CODE = [{"type": "source-code", "repo": "o/r", "path": "a.py", "commit": "abcdef1"}]


def rec(**kw: Any) -> Record:
    return MODELS[kw["kind"]].model_validate({"name": kw["id"], "sources": SEED, **kw})


def claim(cid: str, status: str, scope: list[dict[str, str]], sources: list[dict[str, Any]] = SEED) -> Record:
    return rec(id=cid, kind="claim", subject="k", statement="s", effect="reject", sources=sources,
               reason={"code": "X", "message": "m"}, scope=scope, verification={"status": status})


def small() -> KB:
    return KB.from_records([
        rec(id="k", kind="kernel", library="lib", phases=["decode"], latest_version="2.0"),
        rec(id="sm90", kind="architecture", vendor="nvidia", compute_capability="9.0", family="Hopper",
            tma={"value": True, "basis": "recorded"}, wgmma={"value": True, "basis": "unverified"}),
        claim("old", "verified", [{"library": "lib", "introduced": "1.0", "fixed": "1.5"}], CODE),
        claim("last", "unverified", [{"library": "lib", "last_affected": "1.9"}]),
        claim("open", "refuted", [{"library": "lib", "introduced": "1.0"}]),
        claim("current", "unverified", [{"library": "lib", "last_affected": "2.0"}]),
        claim("mixed", "unverified", [{"library": "lib", "fixed": "1.0"}, {"library": "lib", "introduced": "1.8"}]),
        claim("other", "unverified", [{"library": "cuda", "fixed": "1.0"}]),
    ])


def test_stats_small() -> None:
    d = stats(small())
    assert d["kinds"] == {"architecture": 1, "claim": 6, "kernel": 1}
    assert d["claims_by_status"] == {"refuted": 1, "unverified": 4, "verified": 1}
    assert d["facts_by_basis"]["recorded"]["count"] == 1 and d["facts_by_basis"]["unverified"]["share"] == 0.5
    assert d["claims_with_primary_source"]["count"] == 1 and d["claims_with_primary_source"]["of"] == 6
    stale = {s["claim"]: s for s in d["stale_scopes"]}
    assert set(stale) == {"old", "last"}  # open, current, mixed reach 2.0; cuda has no recorded release
    assert stale["old"]["scope"] == "< 1.5" and stale["old"]["latest"] == "2.0"


def test_stats_shipped(shipped: KB) -> None:
    d = stats(shipped)
    assert sum(d["kinds"].values()) == d["records"] == len(shipped)
    assert sum(d["claims_by_status"].values()) == d["kinds"]["claim"]
    assert abs(sum(v["share"] for v in d["facts_by_basis"].values()) - 1) < 1e-3
    assert sum(d["evidence_per_gpu"].values()) == d["kinds"].get("evidence", 0)
    r = run_kb("stats", "--json")
    assert r.code == 0 and json.loads(r.out)["records"] == d["records"]
    t = run_kb("stats")
    assert "claims with a primary source" in t.out
