"""`kb probe list` / `kb probe run` / `kb probe apply` as library functions returning data (no printing)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kbtool.errors import ProbeError, UsageError
from kbtool.model import Claim, Evidence
from kbtool.probe import engine, measured
from kbtool.probe import evidence as ev_io
from kbtool.probe.environment import kb_context
from kbtool.probe.rejudge import claim_context, probes_by_id, rejudge
from kbtool.probe.runner import CaseResult, run_cases
from kbtool.probe.spec import Judge, Probe, ProbeSpec, discover
from kbtool.probe.unrecorded import Unrecorded
from kbtool.probe.verdicts import Skip, Update, plan, untestable_block
from kbtool.store.writer import update_verification, verification_changes

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Fit:
    probe: Probe
    fits: bool
    why: str | None = None
    missing: list[str] = field(default_factory=list)


@dataclass
class ProbeRun:
    probe: Probe
    status: str  # ran | skipped | failed
    why: str | None = None
    results: list[CaseResult] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    evidence: Evidence | None = None
    evidence_path: Path | None = None
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.outcome] = out.get(r.outcome, 0) + 1
        return out


@dataclass
class RunReport:
    env: dict[str, Any]
    runs: list[ProbeRun] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    untestable: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(claim, reason, architecture of the host) for claims whose probe could not run for missing packages."""
    wrote_claims: bool = False

    @property
    def gpu(self) -> bool:
        return bool(self.env.get("gpu"))


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fit(probe: Probe, env: dict[str, Any]) -> Fit:
    """Whether a probe can run here, and why not."""
    libs = env.get("libraries") or {}
    missing = [p for p in probe.spec.packages
               if p != "torch" and not any(alt in libs for alt in p.split("|"))]  # "a|b": either will do
    if "torch" in probe.spec.packages and not env.get("torch"):
        missing.insert(0, "torch")
    if not env.get("gpu") and engine.needs_gpu(probe.spec):  # engine probes (kbtool/probe/engine.py) need none
        return Fit(probe, False, "no CUDA GPU", missing)
    if missing:
        return Fit(probe, False, f"not installed: {', '.join(missing)}", missing)
    archs = probe.spec.archs
    if archs and env.get("architecture") not in archs:
        return Fit(probe, False, f"needs {', '.join(archs)}; this GPU is {env.get('architecture') or 'unknown'}")
    return Fit(probe, True)


def list_probes(env: dict[str, Any]) -> list[Fit]:
    probes = discover()
    engine_envs: dict[str, dict[str, Any]] = {}  # one fingerprint per engine interpreter

    def engine_env(spec: ProbeSpec) -> dict[str, Any]:
        name = engine.engine_of(spec)
        if name not in engine_envs:
            engine_envs[name] = engine.environment(env, spec=spec)
        return engine_envs[name]

    return [fit(p, env if engine.needs_gpu(p.spec) else engine_env(p.spec)) for p in probes]


def select(
    probes: list[Probe], probe_id: str | None, claim_id: str | None, exclude: list[str] | None = None
) -> list[Probe]:
    """Probes by id or by a claim they test, less the excluded ids; no selector selects every probe."""
    unknown = [x for x in exclude or [] if x not in {p.spec.id for p in probes}]
    if unknown:
        raise UsageError(f"unknown probe '{unknown[0]}' in --exclude")
    chosen = [p for p in probes if p.spec.id not in (exclude or [])]
    if probe_id:
        chosen = [p for p in chosen if p.spec.id == probe_id]
        if not chosen:
            ids = ", ".join(p.spec.id for p in probes)
            raise UsageError(f"unknown probe '{probe_id}'", fix=f"one of: {ids}")
    if claim_id:
        chosen = [p for p in chosen if claim_id in p.spec.claims]
        if not chosen:
            raise UsageError(f"no probe tests claim '{claim_id}'", fix="see `kb probe list` for what each tests")
    return chosen


def load_claims(records: Path, *, strict: bool = False) -> dict[str, tuple[Claim, Path]]:
    """The claims under records/claims. With `strict` (before writing verdicts), a claim file that does not load
    stops the command: judging without it would rewrite other claims from a partial tree."""
    from kbtool.store.records import load_tree

    folder = records / "claims"
    if not folder.is_dir():
        return {}
    result = load_tree(records, [folder])
    bad = [f for f in result.findings if f.severity == "error"]
    if strict and bad:
        where = "; ".join(f"{f.file}:{f.line or 1} {f.message}" for f in bad[:3])
        raise UsageError(f"{len(bad)} claim file(s) do not load, so no verdicts are written: {where}",
                         fix="fix them first (`kb validate` locates each), then run again")
    return {x.record.id: (x.record, x.path) for x in result.loaded if isinstance(x.record, Claim)}


def _judge(probe: Probe, results: list[CaseResult], env: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    obs = [r.observation() for r in results]
    try:
        raw = probe.judge(obs, env)
        return ev_io.clean_verdicts(raw, probe.spec.claims), None
    except Exception as exc:  # a judge bug must not lose the run's observations
        return [], f"judge failed: {type(exc).__name__}: {exc}"


def run_probe(
    probe: Probe,
    env: dict[str, Any],
    *,
    progress: Callable[[CaseResult], None] | None = None,
    kb: dict[str, Any] | None = None,
    deadline: float | None = None,
    claims: dict[str, Any] | None = None,
) -> ProbeRun:
    """Run one probe's cases and judge them (no writing). `kb` reaches the judge as env['kb'] and `claims`
    (claim_context) as env['claims']; neither is part of the record."""
    start = time.monotonic()
    started = now()
    try:
        cases = probe.cases()
    except Exception as exc:
        return ProbeRun(probe, "failed", f"cases() failed: {type(exc).__name__}: {exc}")
    cases = _first(cases, os.environ.get("KB_PROBE_FIRST", ""))
    results = run_cases(probe, cases, root=REPO_ROOT, progress=progress, deadline=deadline)
    judge_env = {**env, "kb": kb or {}, "claims": claims or {}}
    verdicts, judge_error = _judge(probe, results, judge_env)
    data: dict[str, Any] = {}
    if probe.summarize:
        try:
            data = probe.summarize([r.observation() for r in results], judge_env)
        except Exception as exc:
            data = {"summarize_error": f"{type(exc).__name__}: {exc}"}
    if judge_error:
        data["judge_error"] = judge_error
    evidence = ev_io.build(probe.spec, env, started, now(), results, verdicts, data=data)
    run = ProbeRun(probe, "ran", judge_error, results, verdicts, evidence)
    run.seconds = round(time.monotonic() - start, 1)
    return run


def _first(cases: list[dict[str, Any]], names: str) -> list[dict[str, Any]]:
    """The cases whose `name` is listed (comma-separated, KB_PROBE_FIRST) moved to the front, so a run cut by its
    time budget reaches them; the set of cases is unchanged."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    if not wanted:
        return cases
    front = [c for n in wanted for c in cases if c.get("name") == n]
    return front + [c for c in cases if not any(c is f for f in front)]


def _untestable_reason(probe: Probe, env: dict[str, Any], missing: list[str]) -> str:
    host = f"{env.get('gpu')}, torch {env.get('torch')}, CUDA {env.get('cuda')}"
    names = ", ".join(m.replace("|", " or ") for m in missing)
    return f"{names} not installed on the probe host ({host}). {probe.spec.untestable}".strip()


def apply_updates(
    updates: list[Update],
    claims: dict[str, tuple[Claim, Path]],
    replan: Callable[[Claim], Update | None] | None = None,
) -> list[Path]:
    """Write the updates. Each is re-planned from the file's current content, under its lock, when the claim
    changed on disk since it was planned (another writer), so no update is lost."""
    written = []
    for u in updates:
        planned, path = claims[u.claim]

        def rebase(data: Any, u: Update = u, planned: Claim = planned) -> dict[str, Any] | None:
            if not isinstance(data, dict):
                raise ProbeError(f"{u.claim}: the claim file no longer holds a record")
            current = Claim.model_validate(data)
            if current.verification == planned.verification or replan is None:
                return u.verification
            again = replan(current)
            return again.verification if again else None

        if update_verification(path, rebase):
            written.append(path)
    return written


def run(
    *,
    records: Path,
    probe_id: str | None = None,
    claim_id: str | None = None,
    write: bool = False,
    out: Path | None = None,
    env: dict[str, Any] | None = None,
    on_probe: Callable[[Probe, int], Callable[[CaseResult], None] | None] | None = None,
    exclude: list[str] | None = None,
    budget_s: float | None = None,
) -> RunReport:
    """`kb probe run`: without a GPU nothing runs and the report says why. With `budget_s`, no case starts
    after that many seconds (the rest are recorded SKIPPED)."""
    from kbtool.probe.environment import fingerprint

    env = env if env is not None else fingerprint(REPO_ROOT, records=records)
    deadline = time.monotonic() + budget_s if budget_s else None
    report = RunReport(env)
    probes = select(discover(), probe_id, claim_id, exclude)
    if not report.gpu:  # engine probes run without a GPU, under the engine's own environment
        probes = [p for p in probes if not engine.needs_gpu(p.spec)]
        if not probes:
            return report
    claims = load_claims(records, strict=write)
    folder = out or records / "evidence"
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    for probe in probes:
        penv = env if engine.needs_gpu(probe.spec) else engine.environment(env, spec=probe.spec)
        f = fit(probe, penv)
        if not f.fits:
            report.runs.append(ProbeRun(probe, "skipped", f.why))
            if f.missing and probe.spec.untestable:
                reason = _untestable_reason(probe, env, f.missing)
                sm = env.get("architecture")
                report.untestable += [(c, reason, sm) for c in probe.spec.claims if not claim_id or c == claim_id]
            continue
        n_cases = len(probe.cases())
        progress = on_probe(probe, n_cases) if on_probe else None
        pr = run_probe(probe, penv, progress=progress, kb=kb_context(records, penv), deadline=deadline,
                       claims=claim_context(claims, probe.spec.claims))
        if pr.evidence is not None:
            pr.evidence_path, pr.evidence = ev_io.write(folder, pr.evidence)
            report.written.append(pr.evidence_path)
        report.runs.append(pr)
    if out is not None:
        report.written.append(write_manifest(out, report, today))
    if write:
        evidence = [r.evidence for r in report.runs if r.evidence is not None]
        if claim_id:
            evidence = [e.model_copy(update={"verdicts": [v for v in e.verdicts if v.claim == claim_id]})
                        for e in evidence]
        report.updates, report.skips, written = _apply(evidence, report.untestable, claims, today)
        written += measured.write(records, evidence)
        report.written += written
        report.wrote_claims = True
    return report


def _apply(
    evidence: list[Evidence],
    untestable: list[tuple[str, str, str | None]],
    claims: dict[str, tuple[Claim, Path]],
    today: str,
    *,
    write: bool = True,
) -> tuple[list[Update], list[Skip], list[Path]]:
    updates, skips = plan(evidence, {k: c for k, (c, _) in claims.items()}, today)
    judged = {u.claim for u in updates}
    for cid, reason, sm in untestable:
        if cid in judged:
            continue  # evidence (a recorded run, judged again) speaks for it: not untestable
        if cid not in claims:
            skips.append(Skip(cid, "no such claim"))
            continue
        claim = claims[cid][0]
        block = untestable_block(claim, reason, today, sm)
        if block is None:
            skips.append(Skip(cid, f"left as {claim.verification.status}: untestable here ({reason})"))
            continue
        updates.append(Update(cid, str(claim.verification.status), str(block["status"]), block, reason))
    return updates, skips, apply_updates(updates, claims, _replanner(evidence, untestable, today)) if write else []


def _replanner(evidence: list[Evidence], untestable: list[tuple[str, str, str | None]],
               today: str) -> Callable[[Claim], Update | None]:
    """The update for a claim planned again from its current content (another writer changed it meanwhile)."""

    def replan(claim: Claim) -> Update | None:
        again, _ = plan(evidence, {claim.id: claim}, today)
        if again:
            return again[0]
        for cid, reason, sm in untestable:
            block = untestable_block(claim, reason, today, sm) if cid == claim.id else None
            if block is not None:
                return Update(cid, str(claim.verification.status), str(block["status"]), block, reason)
        return None

    return replan


MANIFEST = "probe-run.json"


def write_manifest(out: Path, report: RunReport, today: str) -> Path:
    """A summary beside the evidence files (environment, probes, untestable claims) for `kb probe apply`."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    data = {
        "date": today,
        "environment": report.env,
        "probes": [
            {"id": r.probe.spec.id, "status": r.status, "why": r.why, "seconds": r.seconds,
             "evidence": r.evidence.id if r.evidence else None, "outcomes": r.counts()}
            for r in report.runs
        ],
        "untestable": [{"claim": c, "reason": why, "sm": sm} for c, why, sm in report.untestable],
    }
    path = out / MANIFEST
    from kbtool.store.writer import atomic_write

    atomic_write(path, json.dumps(data, indent=2) + "\n")
    return path


def apply(records: Path, paths: list[Path], *, write: bool,
          left_out: list[Unrecorded] | None = None) -> tuple[list[Update], list[Skip], list[Path]]:
    """`kb probe apply`: apply evidence written by `kb probe run --out DIR` elsewhere (files or that folder,
    whose probe-run.json also lists the claims found untestable there) to the claims here.

    Evidence of an engine release the KB has no resolution data for (kbtool/probe/unrecorded.py) is left out
    whole and appended to `left_out`. Everything is computed before anything is written: the evidence imported,
    the claims' verification blocks, then the measurement records."""
    files: list[Path] = []
    untestable: list[tuple[str, str, str | None]] = []
    dates: list[str] = []
    for p in paths:
        if p.is_dir():
            files += sorted(p.glob("*.yaml"))
            manifest = p / MANIFEST
            if manifest.exists() or manifest.is_symlink():
                data = _manifest(manifest)
                sm = (data.get("environment") or {}).get("architecture")
                untestable += [(u["claim"], u["reason"], u.get("sm", sm)) for u in data.get("untestable", [])]
                untestable += untestable_today(data)
                dates.append(str(data.get("date")))
        else:
            files.append(p)
    if not files and not untestable:
        raise UsageError("no evidence files given", fix="pass the folder or files written by `kb probe run --out`")
    last = {(c, sm): why for c, why, sm in untestable}  # one reason a claim and host: today's probe lists win
    untestable = [(c, why, sm) for (c, sm), why in last.items()]
    claims = load_claims(records, strict=write)
    if not claims:
        raise ProbeError(f"no claims under {records / 'claims'}")
    current = {old: c.id for c, _ in claims.values() for old in c.formerly}  # renamed claims keep their evidence
    read = [ev_io.load(p) for p in files]  # a file that is no evidence record fails here, before the judges load
    probes = probes_by_id()
    loaded, gaps = _judgeable(read, records, probes)
    if left_out is not None:
        left_out += gaps
    evidence, _ = import_evidence(records / "evidence", loaded, write=False)  # the ids a write gives them
    evidence = [e.renamed(current) for e in evidence]
    evidence = list({e.id: e for e in evidence}.values())  # a record given twice (folder and file) counts once
    evidence = _judged_again(evidence, records, claims, probes)
    if not evidence and not untestable:
        return [], [], []
    today = max([e.started[:10] for e in evidence] + dates)
    updates, skips, _ = _apply(evidence, untestable, claims, today, write=False)
    updates = [dataclasses.replace(u, changes=verification_changes(claims[u.claim][1], u.verification))
               for u in updates]
    if not write:
        return updates, skips, []
    measurements = measured.planned(records, evidence, probes)
    _, imported = import_evidence(records / "evidence", loaded, write=True)
    written = apply_updates([u for u in updates if u.changes], claims, _replanner(evidence, untestable, today))
    return updates, skips, imported + written + measured.write_planned(measurements)


def _judgeable(evidence: list[Evidence], records: Path,
               probes: dict[str, Judge]) -> tuple[list[Evidence], list[Unrecorded]]:
    """The evidence the KB can judge, and what it lacks for the rest (an engine release without its records)."""
    from kbtool.probe.unrecorded import engine_of, unrecorded

    if not any(engine_of(ev, probes) for ev in evidence):
        return evidence, []
    from kbtool.kb import load_kb
    from kbtool.solve.imagebuild import image_of

    gaps = unrecorded(image_of(load_kb(records)[0]), evidence, probes)
    left = {g.evidence for g in gaps}
    return [ev for ev in evidence if ev.id not in left], gaps


def _judged_again(evidence: list[Evidence], records: Path, claims: Any, probes: dict[str, Judge]) -> list[Evidence]:
    """Each record with today's verdicts. A judge handed no accelerator or architecture record (an engine probe's
    "no GPU" runs: what `kb validate` judges) reads them from the verdict cache as validate does
    (kbtool.probe.judged); a GPU run's judge compares with the KB's records of its GPU and judges again here."""
    from kbtool.model.evidence import VerdictEntry

    cached: Any = None
    out = []
    for ev in evidence:
        context = kb_context(records, ev.environment.model_dump(mode="json"))
        if context:
            out.append(rejudge(ev, claims, probes, context))
            continue
        if cached is None:
            from kbtool.kb import load_kb
            from kbtool.probe.judged import Rejudged

            cached = Rejudged(load_kb(records)[0])
        verdicts = [VerdictEntry.model_validate(v) for v in cached.verdicts(ev)]
        out.append(ev.model_copy(update={"verdicts": verdicts}))
    return out


def _manifest(path: Path) -> dict[str, Any]:
    """probe-run.json, read through the untrusted-file reader and checked for the shape `apply` reads."""
    from kbtool.store.untrusted import load_json

    data = load_json(path)
    bad = not isinstance(data, dict) or not isinstance(data.get("environment") or {}, dict) or \
        not isinstance(data.get("untestable", []), list) or \
        not all(isinstance(u, dict) and isinstance(u.get("claim"), str) and isinstance(u.get("reason"), str)
                for u in data.get("untestable", [])) or not isinstance(data.get("probes", []), list) or \
        not all(isinstance(x, dict) for x in data.get("probes", []))
    if bad:
        raise ProbeError(f"{path}: not a probe-run manifest (an object with environment and untestable "
                         "[{claim, reason}])", fix="pass the folder `kb probe run --out` wrote")
    return dict(data)


def untestable_today(manifest: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """For each probe a run skipped for missing packages, today's claim list of that probe with its reason (a
    probe may test more claims now than on the day of the run; the host lacked its packages either way)."""
    env = manifest.get("environment") or {}
    out: list[tuple[str, str, str | None]] = []
    sm = env.get("architecture")
    by_id = {p.spec.id: p for p in discover()}
    for entry in manifest.get("probes", []):
        probe = by_id.get(str(entry.get("id")))
        why = str(entry.get("why") or "")
        if probe is None or entry.get("status") != "skipped" or not why.startswith("not installed: "):
            continue
        if not probe.spec.untestable:
            continue
        missing = [m.strip().replace(" or ", "|") for m in why.removeprefix("not installed: ").split(",")]
        reason = _untestable_reason(probe, env, missing)
        out += [(c, reason, sm) for c in probe.spec.claims]
    return list(dict.fromkeys(out))


def import_evidence(folder: Path, evidence: list[Evidence], *, write: bool) -> tuple[list[Evidence], list[Path]]:
    """The evidence as the records tree will hold it, and the files written for it.

    A record already in `folder` with the same content is used as it is (applying twice imports nothing).
    Otherwise it is written there by the same rule as `kb probe run`: its id gains -2, -3, ... when the name is
    taken by another run's record, and the claims then cite that id. Without `write` nothing is written, but
    the ids are the ones a write would give."""
    out: list[Evidence] = []
    written: list[Path] = []
    for ev in evidence:
        same = _already_there(folder, ev)
        if same is not None:
            out.append(same)
        elif write:
            folder.mkdir(parents=True, exist_ok=True)
            path, ev = ev_io.write(folder, ev)
            written.append(path)
            out.append(ev)
        else:
            out.append(ev_io.free_path(folder, ev)[1])
    return out, written


def _already_there(folder: Path, ev: Evidence) -> Evidence | None:
    """The record in `folder` (under ev's id or a -N variant of it) whose content is ev's, if any."""
    n = 1
    while True:
        eid = ev.id if n == 1 else f"{ev.id}-{n}"
        path = folder / f"{eid}.yaml"
        if not path.exists():
            return None
        try:
            there = ev_io.load(path)
        except ProbeError:
            there = None
        if there is not None and there.model_copy(update={"id": ev.id}) == ev:
            return there
        n += 1
