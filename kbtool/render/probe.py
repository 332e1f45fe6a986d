"""Rendering for `kb probe list|run|apply`: tables, a progress bar, and the JSON shapes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kbtool.probe import boot_error
from kbtool.probe.commands import Fit, RunReport
from kbtool.probe.runner import CaseResult
from kbtool.probe.spec import Probe
from kbtool.probe.verdicts import Skip, Update
from kbtool.render.console import err, out

OUTCOME_STYLE = {"OK": "green", "UNSUPPORTED": "yellow", "OOM": "magenta", "ERROR": "red", "TIMEOUT": "red"}


def env_line(env: dict[str, Any]) -> str:
    if not env.get("gpu"):
        return f"no CUDA GPU: {env.get('reason', 'not detected')}"
    libs = ", ".join(f"{k} {v}" for k, v in sorted((env.get("libraries") or {}).items()))
    mem = f"{env['memory_bytes'] / 2**30:.0f} GiB" if env.get("memory_bytes") else "?"
    return (f"{env['gpu']} (cc {env.get('compute_capability')}, {env.get('architecture') or '?'}, "
            f"{env.get('sm_count')} SMs, {mem}), driver {env.get('driver')}, CUDA {env.get('cuda')}, "
            f"torch {env.get('torch')}" + (f"; {libs}" if libs else ""))


def fits_json(env: dict[str, Any], fits: list[Fit]) -> dict[str, Any]:
    return {"environment": env, "probes": [
        {"id": f.probe.spec.id, "version": f.probe.spec.version, "claims": f.probe.spec.claims,
         "cases": len(f.probe.cases()), "fits": f.fits, "why_not": f.why} for f in fits]}


def list_text(env: dict[str, Any], fits: list[Fit]) -> None:
    out.print(env_line(env))
    table = Table(show_lines=False)
    for col in ("probe", "v", "cases", "fits", "why not", "claims"):
        table.add_column(col)
    for f in fits:
        table.add_row(f.probe.spec.id, str(f.probe.spec.version), str(len(f.probe.cases())),
                      "[green]yes[/]" if f.fits else "[red]no[/]", f.why or "", "\n".join(f.probe.spec.claims))
    out.print(table)


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[Probe, int], Callable[[CaseResult], None] | None]]:
    """A per-probe progress bar on stderr; yields the runner's on_probe hook."""
    if not enabled:
        yield lambda _probe, _n: None
        return
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[last]}"), console=err, transient=False)
    with bar:

        def on_probe(probe: Probe, n: int) -> Callable[[CaseResult], None]:
            task = bar.add_task(probe.spec.id, total=n, last="")

            def step(r: CaseResult) -> None:
                bar.update(task, advance=1, last=f"{r.outcome} {json.dumps(r.params)[:60]}")

            return step

        yield on_probe


def _counts(c: dict[str, int]) -> str:
    return " ".join(f"[{OUTCOME_STYLE.get(k, 'white')}]{k} {v}[/]" for k, v in sorted(c.items()))


def update_rows(updates: list[Update], skips: list[Skip]) -> Table:
    table = Table(title="claims")
    for col in ("claim", "was", "now", "why"):
        table.add_column(col)
    for u in updates:
        table.add_row(u.claim, u.old_status, u.new_status, u.why[:160])
    for s in skips:
        table.add_row(s.claim, "", "[dim]unchanged[/]", s.why[:160])
    return table


def run_text(report: RunReport) -> None:
    out.print(env_line(report.env))
    if not report.gpu and not report.runs:  # engine probes (no GPU needed) may still have run
        out.print("Nothing was run: probes need a CUDA GPU. `kb probe list` shows what each needs.")
        return
    table = Table(title="probe runs")
    for col in ("probe", "status", "cases", "outcomes", "seconds", "verdicts", "evidence"):
        table.add_column(col)
    for r in report.runs:
        verdicts = "\n".join(f"{v['claim']}: {v['verdict']}" for v in r.verdicts)
        table.add_row(r.probe.spec.id, r.status if not r.why else f"{r.status}: {r.why}", str(len(r.results)),
                      _counts(r.counts()), f"{r.seconds:.1f}", verdicts,
                      str(r.evidence_path) if r.evidence_path else "")
    out.print(table)
    if report.wrote_claims:
        out.print(update_rows(report.updates, report.skips))
    elif any(r.verdicts for r in report.runs):
        out.print("Claims unchanged (add --write to update their verification).")


def run_json(report: RunReport) -> None:
    data = {
        "environment": report.env,
        "runs": [{"probe": r.probe.spec.id, "status": r.status, "why": r.why, "seconds": r.seconds,
                  "outcomes": r.counts(), "verdicts": r.verdicts,
                  "evidence": r.evidence.id if r.evidence else None,
                  "evidence_path": str(r.evidence_path) if r.evidence_path else None,
                  "cases": [c.observation() for c in r.results]} for r in report.runs],
        "untestable": [{"claim": c, "reason": why, "sm": sm} for c, why, sm in report.untestable],
        "updates": [{"claim": u.claim, "was": u.old_status, "now": u.new_status, "why": u.why}
                    for u in report.updates],
        "skipped_claims": [{"claim": s.claim, "why": s.why} for s in report.skips],
        "written": [str(p) for p in report.written],
    }
    print(json.dumps(data, indent=2))


def apply_text(updates: list[Update], skips: list[Skip], written: list[Any], write: bool,
               unchanged: bool = False) -> None:
    """The changes first; the claims the evidence leaves as they are (and the skipped ones) only with `unchanged`."""
    changes = [u for u in updates if u.changes]
    same = [u for u in updates if not u.changes]
    if changes:
        table = update_rows(changes, [])
        table.title = f"{len(changes)} change(s)"
        out.print(table)
    else:
        out.print("No changes: every claim the evidence speaks for already says what it shows.")
    if unchanged:
        table = update_rows(same, skips)
        table.title = "unchanged"
        out.print(table)
    elif same or skips:
        out.print(f"{len(same)} claim(s) unchanged, {len(skips)} skipped (--unchanged lists them).")
    if not write:
        out.print("Nothing written (add --write to update the claims).")
    else:
        n_meas = sum(1 for p in written if "measurements" in str(p))
        out.print(f"{len(written) - n_meas} claim file(s) updated, {n_meas} measurement record(s) written.")


def unrecorded_text(gaps: list[Any]) -> None:
    """`kb probe apply`: the evidence left out because the KB cannot judge its engine release, each with the record
    it lacks and how to add it (kbtool/probe/unrecorded.py)."""
    for g in gaps:
        err.print(f"[bold]left out[/bold] {escape(g.evidence)} ({g.library} {g.release}): {escape(g.missing)}",
                  highlight=False)
        err.print(f"  fix: {escape(g.fix)}", highlight=False)
    if gaps:
        err.print(f"{len(gaps)} evidence record(s) not applied: nothing was written from them; add the record(s) "
                  "named and apply again.", highlight=False)


def boot_error_text(errors: list[dict[str, Any]], rows: list[Any], written: Any | None) -> None:
    """`kb probe boot-error`: kb's pool beside vLLM's for every recorded boot, then the error per model class."""
    t = Table(title="kb's KV pool against the engine's own, per recorded boot", title_justify="left")
    for col in ("boot", "class", "engine", "kb", "error", "concurrency"):
        t.add_column(col, justify="left" if col in ("boot", "class") else "right")
    for e in sorted(errors, key=lambda e: -abs(e["error"])):
        conc = e["concurrency_error"]
        t.add_row(str(e["case"]), e["class"], f"{e['measured']:,}", f"{e['predicted']:,}", f"{e['error']:+.2%}",
                  f"{conc:+.2%}" if conc is not None else "-")
    out.print(t)
    s = Table(title="by model class", title_justify="left")
    for col in ("accelerator", "release", "class", "boots", "lowest", "highest"):
        s.add_column(col)
    for r in rows:
        c = r.conditions
        if r.quantity == boot_error.RISE:
            continue
        s.add_row(str(r.accelerator), str(c[boot_error.RELEASE]), str(c["class"]), str(c["boots"]),
                  f"{c['lowest']:+.2%}", f"{c['highest']:+.2%}")
    out.print(s)
    g = Table(title="V2 runner: profile peak with CUDA graphs minus eager (GiB, not modelled)", title_justify="left")
    for col in ("accelerator", "release", "boots", "per model"):
        g.add_column(col)
    for r in rows:
        if r.quantity == boot_error.RISE:
            c = r.conditions
            g.add_row(str(r.accelerator), str(c[boot_error.RELEASE]), str(c["boots"]), str(c["models"]))
    out.print(g)
    if written:
        out.print(f"wrote {written}")


@contextmanager
def sweep_bar(enabled: bool, total: int) -> Iterator[Callable[[str, str], None]]:
    """One bar over a sweep's releases on stderr; yields the sweep's on_step(release, step) hook."""
    if not enabled:
        yield lambda _release, _step: None
        return
    bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[last]}"), console=err, transient=False)
    with bar:
        task = bar.add_task("sweep", total=total, last="")

        def on_step(release: str, step: str) -> None:
            done = step in ("ok", "failed")
            bar.update(task, advance=1 if done else 0, last=f"{release}: {step}")
            if done:
                err.print(f"{release}: {step}")

        yield on_step


def sweep_text(tasks: list[Any], skipped: list[str], results: list[Any], seconds: float, dry_run: bool) -> None:
    if skipped:
        out.print(f"skipped (evidence exists; --force runs them again): {', '.join(skipped)}")
    if not tasks:
        out.print("nothing to do: every release chosen has complete evidence")
        return
    if dry_run:
        for t in tasks:
            again = f" (again: {', '.join(t.retry)} did not complete)" if t.retry else ""
            over = f" with override {', '.join(t.overrides)}" if t.overrides else ""
            gap = " (never swept, between recorded releases)" if t.gap else ""
            out.print(f"would run {t.release}{over}: {', '.join(t.probes)}{again}{gap}")
        return
    table = Table(title="sweep")
    for col in ("release", "status", "install s", "probes s", "probes"):
        table.add_column(col)
    for r in results:
        probes = "; ".join(f"{k} {v}" for k, v in r.probes.items()) or (r.why or "").split("\n")[0]
        table.add_row(r.release, r.status, str(r.install_s), str(round(r.probe_s, 1)), probes[:200])
    out.print(table)
    for r in results:
        parts = [f"install {r.install_s:,.0f} s", *(f"{k} {v:,.0f} s" for k, v in r.probe_seconds.items()),
                 f"cleanup {r.cleanup_s:,.0f} s"]
        out.print(f"{r.release} time: {', '.join(parts)}")
        if r.overrides:
            out.print(f"{r.release} installed with override {', '.join(r.overrides)} (its evidence names it)")
        if r.why and "\n" in r.why:
            out.print(f"{r.release}: {r.why}", markup=False)
        for name, state in (r.tables or {}).items():
            if state != "ok":
                out.print(f"{r.release}: table {name} {state}", markup=False)
        if r.record:
            release_record_text(r.record)
    out.print(f"{len(results)} release(s) in {seconds:.0f} s")


def _v(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def release_record_text(d: dict[str, Any]) -> None:
    """One drafted engine-release record (kbtool/probe/release_record.py): where, against which release, what
    changed (each cited to the probe's evidence, its code line not read yet), what the evidence does not decide,
    and any difference left."""
    rel = d["release"]
    if d.get("why"):
        out.print(f"{rel} engine-release record: not drafted ({d['why']})", markup=False)
        return
    state = {"read": "kept (read by hand, not overwritten)", "draft": "redrafted"}.get(d.get("existing") or "",
                                                                                     "drafted")
    where = f"{d['path']}" + ("" if d.get("written") or d.get("existing") == "read" else " (not written)")
    out.print(f"{rel} engine-release record {state}: {where}, from its own evidence against {d.get('label') or ''} "
              f"{d['previous']} ({d['points']} config points, {d['planning_points']} planning points replayed)",
              markup=False)
    if d.get("existing") == "read":
        if not d.get("differs"):
            out.print("  the release's evidence agrees with it on every value", markup=False)
        for line in d.get("differs") or []:
            out.print(f"  differs from the evidence: {line}", markup=False)
        return
    for name, old, new in d.get("changed") or []:
        out.print(f"  changed {name}: {_v(old)} -> {_v(new)} (cites the probe's evidence; code line not read yet)",
                  markup=False)
    if d.get("unpinned"):
        out.print(f"  not decided by the evidence, carried from {d['previous']} (basis unverified): "
                  f"{', '.join(d['unpinned'])}", markup=False)
    if d.get("unresolved"):
        out.print(f"  {len(d['unresolved'])} difference(s) from the evidence left (read the release's code): "
                  f"{d['unresolved'][0]}", markup=False)


def events_text(changes: list[Any], written: list[Any], write: bool) -> None:
    if not changes:
        out.print("Every swept claim's engine scope already agrees with its releases.")
        return
    for ch in changes:
        out.print(f"[bold]{ch.claim}[/]")
        for e in ch.events:
            out.print(f"  {e.text()}")
        out.print(f"  scope: {ch.old} -> {ch.new}")
        if ch.held_back:
            out.print(f"  not written: {ch.held_back}", markup=False)
    out.print(f"{len(written)} claim file(s) written" if write else "Add --write to rewrite these scopes.")
