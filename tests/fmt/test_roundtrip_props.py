"""Hypothesis: for any record data, formatting keeps the meaning and is idempotent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbtool.fmt import canonical
from kbtool.fmt.core import same
from kbtool.store.reader import parse_bytes

PATH = Path("/kb/records/claims/x.yaml")
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40)
scalar = st.one_of(text, st.integers(-10**6, 10**6), st.booleans(), st.none(),
                   st.floats(allow_nan=False, allow_infinity=False, width=32))
leaf = st.fixed_dictionaries({"var": st.sampled_from(["head_dim", "sm", "phase"])},
                             optional={"le": st.integers(0, 512), "in": st.lists(scalar, max_size=3)})


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    rec: dict[str, Any] = {"id": "x", "kind": "claim", "name": draw(text)}
    optional = {"notes": text, "statement": text, "aliases": st.lists(text, max_size=3),
                "requires": st.fixed_dictionaries({"all": st.lists(leaf, min_size=1, max_size=3)}),
                "sources": st.lists(st.fixed_dictionaries({"type": st.just("doc"), "url": text,
                                                           "quote": text}), max_size=2),
                "zz_unknown": scalar}
    for key, strat in optional.items():
        if draw(st.booleans()):
            rec[key] = draw(strat)
    keys = list(rec)
    order = draw(st.permutations(keys))
    return {k: rec[k] for k in order}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.booleans())
def test_format_keeps_meaning_and_is_idempotent(data: dict[str, Any], flow: bool) -> None:
    src = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120, default_flow_style=None if flow
                         else False)
    before, _ = parse_bytes(src.encode(), "x")
    assert before is not None
    out = canonical(src, PATH)
    after, _ = parse_bytes(out.encode(), "x")
    assert after is not None and same(after.data, before.data)
    assert canonical(out, PATH) == out
    assert out.startswith("# yaml-language-server: $schema=../../schema/claim.schema.json\nid: x\nkind: claim\n")
    assert not any(line != line.rstrip(" \t") for line in out.splitlines())
