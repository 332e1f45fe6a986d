"""kbtool/views/parts.py: a two-part claim shows the weaker part's status and each part's own (issue 45)."""

from __future__ import annotations

from kbtool.views.parts import weakest
from kbtool.views.show import show_data
from tests.util import RECORDS

CLAIM = "fa3-fp8-long-context-two-level-accumulation"


def test_weakest() -> None:
    assert weakest(["verified", "unverified"]) == "unverified"
    assert weakest(["verified", "refuted"]) == "refuted"
    assert weakest(["verified", "untestable"]) == "untestable"


def test_the_fa3_fp8_claim_shows_each_part_and_the_weaker_status() -> None:
    from kbtool.kb import load_kb

    kb = load_kb(RECORDS)[0]
    d = show_data(kb, CLAIM)
    parts = {p["id"]: p for p in d["parts"]}
    assert parts["vllm-fa3-fp8-two-level-accumulation-on"]["status"] == "verified"
    assert parts["vllm-fa3-fp8-two-level-accumulation-on"]["evidence"]
    one = parts["fa3-fp8-one-level-accumulation-loses-accuracy"]
    assert d["verification"]["shown_status"] == one["status"] or one["status"] == "verified"
    if one["status"] != "verified":
        assert d["verification"]["shown_status"] != "verified"


def test_the_solver_shows_the_weaker_status_too() -> None:
    from kbtool.query_cli import image

    c = next(c for c in image().claims("flash-attention-3") if c.id == CLAIM)
    d = show_data(__import__("kbtool.kb", fromlist=["load_kb"]).load_kb(RECORDS)[0], CLAIM)
    assert c.status == d["verification"]["shown_status"]
