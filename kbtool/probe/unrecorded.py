"""Evidence of an engine release the KB cannot judge yet (issue 46).

An engine probe's evidence (a probe whose `requires.packages` names a registered engine: sglang-resolve,
sglang-pool, vllm-engine-config, ...) is judged on kb's own resolution of the release that ran, which reads that
release's engine data (SGLang: its engine-priority record; vLLM: its priority record or its recorded selector
grid). Evidence of a release without that data cannot be judged: `kb probe apply` leaves such a record out whole
(nothing imported, no claim or measurement written from it), names the missing record and how to add it, and
exits 1 (kbtool/cli/probe.py). Each engine says what it lacks (Engine.missing_release).
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from kbtool.model import Evidence
    from kbtool.probe.spec import Judge
    from kbtool.solve.image import Image


@dataclass(frozen=True)
class Unrecorded:
    """One evidence record of an engine release the KB has no resolution data for."""

    evidence: str
    library: str
    release: str
    missing: str
    fix: str


def engine_of(ev: Evidence, probes: Mapping[str, Judge]) -> tuple[str, str] | None:
    """(engine, release) of an engine probe's evidence; None for other probes or a run that names no release."""
    from kbtool.solve.engines.registry import names

    judge = probes.get(ev.probe.id)
    if judge is None:
        return None
    needs = set((judge.spec.requires or {}).get("packages") or [])
    for name in names():
        release = ev.environment.libraries.get(name)
        if name in needs and release:
            return name, str(release)
    return None


def unrecorded(img: Image, evidence: list[Evidence], probes: Mapping[str, Judge]) -> list[Unrecorded]:
    """The records among `evidence` whose engine release the KB cannot judge, each with what is missing."""
    from kbtool.solve.engines.registry import ENGINES

    out = []
    for ev in evidence:
        of = engine_of(ev, probes)
        if of is None:
            continue
        gap = ENGINES[of[0]].missing_release(img, of[1])
        if gap is not None:
            out.append(Unrecorded(ev.id, of[0], of[1], *gap))
    return out
