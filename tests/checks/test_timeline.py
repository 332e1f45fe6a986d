"""KB320 (kbtool/checks/timeline.py): a claim's version scope against each swept release's evidence."""

from __future__ import annotations

from kbtool.checks.timeline import scope_findings
from kbtool.probe.events import proposed
from tests.solve.test_timeline import claim, pts


def test_kb320_flags_a_release_the_scope_gets_wrong() -> None:
    c = claim([{"library": "vllm", "last_affected": "0.19.1"}])
    line = pts(("0.19.1", "holds"), ("0.21.0", "holds"), ("0.22.0", "fails"))
    found = scope_findings(c, line)
    assert [m for _, m, _ in found] == ["holds on vllm 0.21.0 (ev-0.21.0) but its vllm scope leaves 0.21.0 out"]
    assert "any..0.21.0" in found[0][2]
    fixed = claim(proposed(c, line) or [])
    assert scope_findings(fixed, line) == []
