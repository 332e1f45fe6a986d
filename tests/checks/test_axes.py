"""kbtool/checks/axes.py: KB403, a kernel no claim says anything about on some core axis."""

from __future__ import annotations

from kbtool.checks.axes import find_kernels_missing_axes
from kbtool.kb import KB
from kbtool.model import Claim
from tests.checks.fixture import records


def test_a_kernel_without_claims_misses_every_axis() -> None:
    kernel = next(r for r in records() if r.kind == "kernel")
    kb = KB.from_records([r for r in records() if not (isinstance(r, Claim) and r.subject == kernel.id)])
    found = [f for f in find_kernels_missing_axes(kb) if kernel.id in f.message]
    assert [f.code for f in found] == ["KB403"]
    assert "head dim" in found[0].message and found[0].severity == "warning"


def test_a_claim_on_an_axis_removes_it_from_the_finding() -> None:
    kb = KB.from_records(list(records()))
    before = {f.message for f in find_kernels_missing_axes(kb)}
    kernel = next(r for r in records() if r.kind == "kernel")
    without = KB.from_records([r for r in records() if not (isinstance(r, Claim) and r.subject == kernel.id)])
    after = {f.message for f in find_kernels_missing_axes(without)}
    assert before != after
