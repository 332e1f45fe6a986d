"""Judging recorded evidence again with the probe's current judge and the claims as they stand now.

An evidence record keeps the cases of a real run and never changes; the verdicts it carries are what the judge of
that day said. The same cases judged by today's judge (a better judge, or claims whose conditions were edited)
may say more. A record is judged again only by a probe of the same id and version (same cases, same `run`), or one that
declares the record's version in `rejudges`;
otherwise, or if the judge fails, its own verdicts stand. They stand too when a recorded file its cases name (a raw
grid) no longer holds what that run wrote (kbtool.probe.recorded): a record is never judged against another run's
grid. Pure apart from importing the judge modules (kbtool/probe/judges/); no probe program is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kbtool.errors import ProbeError
from kbtool.model import Claim, Evidence
from kbtool.model.evidence import VerdictEntry
from kbtool.probe.evidence import clean_verdicts
from kbtool.probe.recorded import GridSuperseded
from kbtool.probe.spec import Judge, judges


def claim_context(claims: Mapping[str, Any], ids: list[str]) -> dict[str, Any]:
    """What a judge reads of each claim it tests: subject, effect, `when`, `requires` and the reason code.
    `claims` maps ids to Claim or to (Claim, path)."""
    out: dict[str, Any] = {}
    for cid in ids:
        entry = claims.get(cid)
        claim = entry[0] if isinstance(entry, tuple) else entry
        if not isinstance(claim, Claim):
            continue
        out[cid] = {"subject": claim.subject, "effect": str(claim.effect), "when": claim.when,
                    "requires": claim.requires, "reason": claim.reason.code if claim.reason else None}
    return out


def observations(ev: Evidence) -> list[dict[str, Any]]:
    """The cases as a judge reads them (the runner's observation shape)."""
    return [{"params": c.params, "outcome": c.outcome, "message": c.message, "kernels": list(c.kernels),
             "max_abs_err": c.max_abs_err, "seconds": c.seconds, "metrics": dict(c.metrics)} for c in ev.cases]


def judge_env(ev: Evidence, claims: Mapping[str, Any], probe: Judge,
              kb: dict[str, Any] | None = None) -> dict[str, Any]:
    env = ev.environment.model_dump(mode="json")
    env["kb"] = kb or {}
    env["claims"] = claim_context(claims, probe.spec.claims)
    return env


def rejudge(ev: Evidence, claims: Mapping[str, Any], probes: Mapping[str, Judge],
            kb: dict[str, Any] | None = None) -> Evidence:
    """`ev` with the verdicts today's judge gives its cases, or `ev` itself when it cannot be judged again."""
    return rejudged(ev, claims, probes, kb)[0]


def rejudged(ev: Evidence, claims: Mapping[str, Any], probes: Mapping[str, Judge],
             kb: dict[str, Any] | None = None) -> tuple[Evidence, str | None]:
    """As `rejudge`, with why the record kept its own verdicts where that is worth telling: a recorded file its
    cases name was replaced by a later run (kbtool.probe.recorded: "grid superseded, not re-judged"). None
    otherwise (judged again, or a probe that does not judge this version again)."""
    probe = probes.get(ev.probe.id)
    if probe is None or ev.probe.version not in (probe.spec.version, *probe.spec.rejudges):
        return ev, None
    try:
        raw = probe.judge(observations(ev), judge_env(ev, claims, probe, kb))
        verdicts = clean_verdicts(raw, probe.spec.claims)
    except GridSuperseded as exc:  # never judged against a grid it did not run: its own verdicts stand
        return ev, str(exc).split("\n", 1)[0]
    except Exception:  # a judge that cannot read an old record leaves the record's own verdicts
        return ev, None
    return ev.model_copy(update={"verdicts": [VerdictEntry.model_validate(v) for v in verdicts]}), None


def reads(ev: Evidence, probe: Judge | None) -> dict[str, list[str]]:
    """What judging `ev` again reads besides the record and the code (the verdict cache's dependencies): the claims
    the probe lists (as claim_context hands them over), and what the probe module's `judge_inputs(observations)`
    says its judge reads itself: the subjects whose claims it reads whole, the record kinds it reads, the files."""
    out: dict[str, list[str]] = {"claims": [], "subjects": [], "kinds": [], "files": []}
    if probe is None:
        return out
    out["claims"] = list(probe.spec.claims)
    if probe.judge_inputs is not None:
        extra = probe.judge_inputs(observations(ev))
        for key in ("subjects", "kinds", "files"):
            out[key] += [str(x) for x in extra.get(key, [])]
    return {k: sorted(set(v)) for k, v in out.items()}


def probes_by_id() -> dict[str, Judge]:
    """probe id -> its judge; {} when a judge module is broken (validate then keeps the recorded verdicts)."""
    try:
        return judges()
    except ProbeError:
        return {}
