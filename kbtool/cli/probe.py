"""`kb probe ...`: probes, evidence, sweeps, campaigns, the verdict seed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kbtool.cli.app import KbOpt, _load_kb, _records, app, fail, print

if TYPE_CHECKING:
    pass


# ---- probe --------------------------------------------------------------------------------------

probe_app = typer.Typer(help="Run gate probes on this GPU; write evidence and update claims.", no_args_is_help=True)
app.add_typer(probe_app, name="probe")


@probe_app.command("list")
def probe_list(json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Show the probes, which fit this machine, and why the others do not."""
    import json

    from kbtool.probe.commands import REPO_ROOT, list_probes
    from kbtool.probe.environment import fingerprint
    from kbtool.render import probe as render

    env = fingerprint(REPO_ROOT)
    fits = list_probes(env)
    if json_:
        print(json.dumps(render.fits_json(env, fits), indent=2))
    else:
        render.list_text(env, fits)


@probe_app.command("run")
def probe_run(
    probe: Annotated[str | None, typer.Option("--probe", help="Run only this probe.")] = None,
    claim: Annotated[str | None, typer.Option("--claim", help="Run the probes that test this claim.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Run every probe that fits (the default).")] = False,
    exclude: Annotated[list[str] | None, typer.Option("--exclude", help="Skip this probe (repeatable).")] = None,
    write: Annotated[bool, typer.Option("--write", help="Update the claims' verification blocks.")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Folder for evidence (default: records/evidence) "
                                             "and probe-run.json.")] = None,
    budget: Annotated[float | None, typer.Option("--budget-s", help="Start no case after this many seconds.")]
    = None,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Run probes in isolated workers, write one evidence record per probe, and with --write tag claims."""
    from kbtool.probe.commands import run
    from kbtool.render import probe as render

    if all_ and (probe or claim):
        fail("--all cannot be combined with --probe or --claim", 2)
    with render.progress_bar(not json_) as on_probe:
        report = run(records=_records(kb), probe_id=probe, claim_id=claim, write=write, out=out,
                     on_probe=on_probe, exclude=exclude, budget_s=budget)
    if json_:
        render.run_json(report)
    else:
        render.run_text(report)


@probe_app.command("apply")
def probe_apply(
    paths: Annotated[list[Path], typer.Argument(help="Evidence files, or a folder written by `kb probe run --out`.")],
    write: Annotated[bool, typer.Option("--write", help="Update the claims' verification blocks.")] = False,
    unchanged: Annotated[bool, typer.Option("--unchanged", help="Also list the claims left as they are.")] = False,
    kb: KbOpt = None,
) -> None:
    """Apply evidence recorded elsewhere (e.g. on a GPU host) to the claims here, with the same scoping."""
    from kbtool.probe.commands import apply
    from kbtool.render import probe as render
    from kbtool.validate import check_incoming

    if write:
        check_incoming(_records(kb), paths)  # validate's checks before anything is copied into the tree
    left_out: list[Any] = []
    updates, skips, written = apply(_records(kb), paths, write=write, left_out=left_out)
    render.apply_text(updates, skips, written, write, unchanged)
    render.unrecorded_text(left_out)
    if left_out:  # evidence of an engine release the KB cannot judge yet: a finding (exit 1), nothing half-written
        raise typer.Exit(1)


@probe_app.command("sweep")
def probe_sweep(
    lib: Annotated[str | None, typer.Option("--lib", help="Library whose releases to sweep (default: the first "
                                                          "registered engine).")] = None,
    from_: Annotated[str | None, typer.Option("--from", help="Oldest release (inclusive).")] = None,
    to: Annotated[str | None, typer.Option("--to", help="Newest release (inclusive).")] = None,
    releases: Annotated[str | None, typer.Option("--releases", help="Only these releases (a,b,c).")] = None,
    new: Annotated[bool, typer.Option("--new", help="Releases newer than the newest with evidence.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Run releases whose evidence exists again.")] = False,
    probes: Annotated[str | None, typer.Option("--probes", help="Only these of the sweep's probes (a,b).")] = None,
    workdir: Annotated[Path, typer.Option("--workdir", help="Where environments, the log and the state go.")]
    = Path("/tmp/sweep"),
    python: Annotated[str | None, typer.Option("--python", help="Interpreter the environments are made from.")]
    = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would run; install nothing.")] = False,
    override: Annotated[list[str] | None, typer.Option("--override", help="A requirement replacing the "
                        "release's own pin (uv), besides probes/sweep-overrides.yaml; repeatable.")] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Install each release of a library in its own environment, run its probes, write evidence, delete it."""
    import json
    from dataclasses import asdict

    from kbtool.probe import sweep as sw
    from kbtool.render import probe as render
    from kbtool.solve.engines.registry import names

    lib = lib or names()[0]
    records = _records(kb)
    if new and (from_ or releases):
        fail("--new cannot be combined with --from or --releases", 2)
    t0 = time.monotonic()
    registry = sw.registry_releases(lib)
    chosen = sw.choose(sw.new_releases(records, lib, registry) if new else registry, from_, to,
                       releases.split(",") if releases else None)
    tasks, skipped = sw.plan(records, lib, chosen, force=force, probes=probes.split(",") if probes else None,
                             overrides=override)
    results = []
    if not dry_run and tasks:
        with render.sweep_bar(not json_, len(tasks)) as on_step:
            results = sw.sweep(records, lib, tasks, workdir=workdir, python=python, on_step=on_step)
    seconds = time.monotonic() - t0
    report = _sweep_report(kb, lib, [r.release for r in results if r.evidence])
    if json_:
        print(json.dumps({"releases": chosen, "skipped": skipped, "tasks": [asdict(t) for t in tasks],
                          "results": [asdict(r) for r in results], "seconds": round(seconds, 1),
                          "changes": report.to_dict() if report else None}, indent=2, default=str))
    else:
        render.sweep_text(tasks, skipped, results, seconds, dry_run)
        if report is not None:
            from kbtool.render.console import out
            from kbtool.render.releasediff import sweep_report

            sweep_report(out, report)
    if any(r.status == "failed" for r in results):
        raise typer.Exit(1)


def _sweep_report(kb: Path | None, lib: str, releases: list[str]) -> Any:
    """What changed at each release that wrote evidence, against the release recorded before it (the records read
    again: the sweep has just written them); None when no release did."""
    from kbtool.solve.engines.registry import ENGINES

    if not releases or lib not in ENGINES:
        return None
    from kbtool.query_cli import image
    from kbtool.views.releasediff import sweep_report

    return sweep_report(_load_kb(kb), image(str(kb) if kb else None, use_cache=True), lib, releases)


@probe_app.command("release-record")
def probe_release_record(
    release: Annotated[str, typer.Argument(help="The release whose record to draft, e.g. 0.34.0.")],
    lib: Annotated[str | None, typer.Option("--lib", help="The engine (its library; default: the first "
                                                          "registered engine).")] = None,
    write: Annotated[bool, typer.Option("--write", help="Write its record under records/engine-releases (never "
                                                        "over a record read by hand).")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Draft a release's engine-release record from its own probe evidence (what `kb probe sweep` writes)."""
    from kbtool.probe import release_record
    from kbtool.render import probe as render
    from kbtool.solve.engines.registry import names

    lib = lib or names()[0]
    got = release_record.draft(_records(kb), lib, release, write=write)
    if got is None:
        fail(f"--lib {lib}: kb drafts no engine-release records for it", 2)
    if json_:
        print(json.dumps({**got.to_dict(), "record": got.record}, indent=2, default=str))
    else:
        render.release_record_text(got.to_dict())
        if got.record is not None and not write and got.existing != "read":
            print("Add --write to write it.")
    if got.record is None or got.unresolved or got.differs:
        raise typer.Exit(1)


@probe_app.command("events")
def probe_events(
    claims: Annotated[list[str] | None, typer.Argument(help="Only these claims.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Rewrite the claims' engine scopes.")] = False,
    kb: KbOpt = None,
) -> None:
    """Version events from swept releases: each claim's vLLM scope as its releases' evidence proves it."""
    from kbtool.probe import events
    from kbtool.render import probe as render

    changes, written = events.run(_records(kb), write_=write, only=claims)
    render.events_text(changes, written, write)


@probe_app.command("seed")
def probe_seed(
    write: Annotated[bool, typer.Option("--write", help="Rewrite <records>/.verdicts.json.gz.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 when the shipped seed is stale (CI).")] = False,
    kb: KbOpt = None,
) -> None:
    """The re-judged verdicts shipped beside the records: every evidence record judged again from scratch, so a fresh
    clone's `kb validate` judges only what its edits reach."""
    from kbtool.probe import seed as seeds
    from kbtool.render.console import out

    root = _records(kb)
    entries = seeds.build(_load_kb(kb))
    old = seeds.stale(root, entries)
    kept = seeds.held(entries)
    if kept:
        from kbtool.probe.recorded import SUPERSEDED

        ids = sorted(kept)
        out.print(f"{len(ids)} evidence records keep their own verdicts ({SUPERSEDED}: a later run of the release "
                  f"replaced the grid they name and no copy is kept): {', '.join(ids[:10])}"
                  f"{' ...' if len(ids) > 10 else ''}\n  fix: restore the grids they ran (python "
                  "probes/_restore_superseded.py), then run this again")
    if write:
        from kbtool.store.writer import atomic_write

        atomic_write(seeds.path_of(root), seeds.dump(entries))
        out.print(f"wrote {seeds.path_of(root)}: {len(entries)} evidence records judged ({len(old)} changed)")
        return
    if old:
        out.print(f"{len(old)} of {len(entries)} seed entries are stale or missing: {', '.join(old[:10])}"
                  f"{' ...' if len(old) > 10 else ''}\n  fix: run `kb probe seed --write` and commit the file")
        raise typer.Exit(1 if check else 0)
    out.print(f"the seed is current: {len(entries)} evidence records")


@probe_app.command("campaign")
def probe_campaign(
    plan: Annotated[Path, typer.Argument(help="Plan file (YAML: tasks of kind probe, release or replay).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for what the tasks return.")] = Path("campaign-out"),
    ray_address: Annotated[str, typer.Option("--ray-address", help="'local' (start one here), 'auto', "
                                             "host:port, or 'none' (run here without Ray).")] = "local",
    store: Annotated[bool, typer.Option("--store-outcomes", help="Write replayed shards beside "
                                        "the recorded grids, as each release's outcomes (release timelines).")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run a plan's tasks as Ray tasks (or in this process); evidence lands in OUT once each task completes."""
    import json
    from dataclasses import asdict

    from kbtool.probe import campaign
    from kbtool.probe.commands import REPO_ROOT
    from kbtool.render.console import err

    def note(r: campaign.TaskResult) -> None:
        if not json_:
            err.print(f"{r.task}: {r.status} {r.seconds:.1f} s" + (f" ({r.error})" if r.error else ""))

    report = campaign.run(plan, out=out, root=REPO_ROOT, ray_address=ray_address, on_done=note, store=store)
    if json_:
        print(json.dumps(asdict(report), indent=2))
    else:
        ok = sum(r.status == "ok" for r in report.results)
        print(f"{report.name}: {ok} of {len(report.results)} task(s) ok on {report.engine} in {report.seconds} s; "
              f"merge evidence with `kb probe apply {out}/*`")
    if any(r.status == "failed" for r in report.results):
        raise typer.Exit(1)


@probe_app.command("boot-error")
def probe_boot_error(
    write: Annotated[bool, typer.Option("--write", help="Rewrite the derived boot-error "
                                                           "measurement record.")]
    = False,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Hold kb's memory answer to every recorded vLLM boot: kb's pool beside vLLM's, and the error per model class
    that answers quote as "estimated" (needs a checkout: the boots' configs are in probes/vllm_boot/models)."""
    from kbtool.probe import boot_error
    from kbtool.query_cli import image
    from kbtool.render import probe as render

    img = image(str(kb) if kb else None)
    errors = boot_error.errors(img)
    if write:
        path, rec = boot_error.write(_records(kb), img)
    else:
        path, rec = None, boot_error.record(img)
    if json_:
        print(json.dumps({"boots": errors, "by_class": [r.model_dump(mode="json", exclude_defaults=True)
                                                         for r in rec.rows], "written": str(path) if path else None},
                         indent=2))
    else:
        render.boot_error_text(errors, rec.rows, path)
