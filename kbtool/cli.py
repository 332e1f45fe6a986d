"""The typer app: parse, call the library, render, exit. Nothing else imports typer.

Exit codes: 0 ok, 1 findings (or a "no" the user asked to fail on), 2 usage or input, 3 internal error.
"""

from __future__ import annotations

import atexit
import builtins
import functools
import gc
import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from kbtool import __version__
from kbtool.errors import KbError
from kbtool.escape import escape

if TYPE_CHECKING:
    from kbtool.kb import KB

def print(*values: object, sep: str = " ", end: str = "\n", file: Any = None, flush: bool = False) -> None:
    """builtins.print with every value passed through kbtool.escape.escape (nothing raw to a terminal)."""
    from kbtool.escape import escape as visible

    builtins.print(*(visible(str(v)) for v in values), sep=sep, end=end, file=file, flush=flush)


app = typer.Typer(
    name="kb",
    help="Attention-kernel and accelerator capability records: validate, query, probe.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
schema_app = typer.Typer(help="Export or check the JSON Schema files generated from the models.",
                         no_args_is_help=True)
app.add_typer(schema_app, name="schema")
topic_app = typer.Typer(help="Import or export topics in seed 001's record format.", no_args_is_help=True)
app.add_typer(topic_app, name="topic")


class Format(StrEnum):
    text = "text"
    json = "json"


KbOpt = Annotated[
    Path | None,
    typer.Option("--kb", help="Records tree to use (default: $KB_RECORDS, the checkout, or the installed copy)."),
]

def _version(value: bool) -> None:
    if value:
        print(f"kb {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Read records afresh; skip the KB cache.")] = False,
) -> None:
    """Attention-kernel and accelerator capability records: validate, query, probe."""
    if no_cache:
        os.environ["KB_NO_CACHE"] = "1"


def _error(message: str, fix: str | None = None) -> None:
    """`error: MESSAGE` on stderr; user text is printed as text, never read as markup."""
    from rich.text import Text

    from kbtool.render.console import err

    err.print(Text.assemble(("error:", "red"), " ", message), highlight=False)
    if fix:
        err.print(Text(f"  fix: {fix}"), highlight=False)


def fail(message: str, code: int = 2, fix: str | None = None) -> NoReturn:
    _error(message, fix)
    raise typer.Exit(code)


def _records(kb: Path | None) -> Path:
    from kbtool.paths import records_dir, root_problem

    root = records_dir(kb)
    problem = root_problem(str(root))
    if problem is not None:
        fail(problem[0], 2, problem[1])
    return root


# ---- validate -----------------------------------------------------------------------------------


@app.command()
def validate(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files or folders (default: the records tree).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help="text or json")] = Format.text,
    json_: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    list_checks: Annotated[bool, typer.Option("--list-checks", help="List every check and exit.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Fail on warnings too.")] = False,
    style: Annotated[bool, typer.Option("--style", help="Also report files not in `kb fmt`'s canonical form "
                                                        "(KB601, slower; `kb fmt --check` is the gate).")] = False,
    kb: KbOpt = None,
) -> None:
    """Check every record: YAML, schema, references and values.

    Findings are grouped by check, each located by file, line and path, with the fix.
    """
    from kbtool.render import findings as render

    if list_checks:
        render.list_checks()
        raise typer.Exit(0)
    from kbtool.validate import validate as run

    report = run(_records(kb), paths, style=style)
    if json_ or fmt is Format.json:
        render.as_json(report)
    else:
        render.text(report)
    raise typer.Exit(report.exit_code(strict))


# ---- schema -------------------------------------------------------------------------------------


@schema_app.command("export")
def schema_export() -> None:
    """Write schema/<kind>.schema.json from the models."""
    from kbtool.schema_io import export

    for p in export():
        print(f"wrote {p}")


@schema_app.command("check")
def schema_check() -> None:
    """Fail if the committed schema files differ from the models."""
    from kbtool.schema_io import drift

    stale = drift()
    if stale:
        fail(f"schema files differ from the models: {', '.join(stale)}", 1, "run `kb schema export`")
    print("schema files match the models")


# ---- show and topics ----------------------------------------------------------------------------


def _load_kb(kb: Path | None) -> KB:
    """The records that validate (kbtool.kb.load_kb); how many files were left out is said on stderr."""
    from kbtool.kb import load_kb

    base, left_out = load_kb(_records(kb))
    if left_out:
        from kbtool.render.console import err

        err.print(f"warning: {left_out} record(s) left out (run `kb validate`)", markup=False, highlight=False)
    return base




def _print_json(data: object) -> None:
    import json

    print(json.dumps(data, indent=2, default=str))


def _emit(data: Any, json_: bool, view: str) -> None:
    """A view's data as JSON, or as text through kbtool.render.views.<view>."""
    if json_:
        _print_json(data)
        return
    from kbtool.render import views as render
    from kbtool.render.console import out

    getattr(render, view)(out, data)


@app.command()
def show(
    record_id: Annotated[str, typer.Argument(metavar="ID", help="Record id or alias.")],
    json_: Annotated[bool, typer.Option("--json", help="Print the record, references and evidence as JSON.")]
    = False,
    kb: KbOpt = None,
) -> None:
    """Show a record with references, verification and evidence.

    A topic's statements are marked with their claims' verification status.
    """
    from kbtool.model.topic import Topic

    base = _load_kb(kb)
    rec = base.resolve(record_id)
    if json_:
        from kbtool.views.show import show_data

        _print_json(show_data(base, rec.id))
    elif isinstance(rec, Topic):
        from kbtool.render.topic import render_topic

        render_topic(rec, base)
    else:
        from kbtool.render import views as render
        from kbtool.render.console import out
        from kbtool.views.show import show_data

        render.show(out, show_data(base, rec.id))


@topic_app.command("import")
def topic_import(
    file: Annotated[Path, typer.Argument(help="A topic in seed 001's format, .yaml/.yml or .json.")],
    topic_id: Annotated[str | None, typer.Option("--id", help="kb id (default: last part of the source id).")] = None,
    seed: Annotated[str | None, typer.Option("--seed", help="Cite this seed file as the source.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Write records/topics/<id>.yaml.")] = False,
    force: Annotated[bool, typer.Option("--force", help="With --write, replace an existing record.")] = False,
    kb: KbOpt = None,
) -> None:
    """Turn a topic in seed 001's format into a topic record with unlinked statements."""
    from kbtool.model.common import Source
    from kbtool.topic import convert

    data = convert.read_format(file)
    source = Source(type="seed", seed=seed) if seed else Source(type="doc", ref=str(file))
    topic = convert.import_topic(data, source=source, topic_id=topic_id, kb=_load_kb(kb), name=str(file))
    if write:
        dest = convert.write_record(topic, _records(kb), force=force)
        print(f"wrote {dest} ({len(topic.statements)} unlinked statements: attach claim ids under `claims`)")
    else:
        print(convert.dump(convert.record_data(topic)), end="")


@topic_app.command("export")
def topic_export(
    topic_id: Annotated[str, typer.Argument(metavar="ID", help="Topic id or alias.")],
    fmt: Annotated[Format, typer.Option("--format", help="yaml (text) or json")] = Format.text,
    derived: Annotated[bool, typer.Option("--derived", help="Write kb's derived verification, not the "
                                                            "source's.")] = False,
    kb: KbOpt = None,
) -> None:
    """Write a topic back in seed 001's format."""
    from kbtool.model.topic import Topic
    from kbtool.topic import convert
    from kbtool.topic.derive import derive

    base = _load_kb(kb)
    rec = base.resolve(topic_id, "topic")
    if not isinstance(rec, Topic):
        fail(f"'{topic_id}' is not a topic", 2)
    data = convert.export_topic(rec, derive(rec, base) if derived else None)
    print(convert.dump(data, "json" if fmt is Format.json else "yaml"), end="")


# ---- views: list, graph, stats, matrix ----------------------------------------------------------


@app.command("list")
def list_cmd(
    kind: Annotated[str | None, typer.Option("--kind", help="Only this kind: claim, kernel, accelerator, ...")]
    = None,
    where: Annotated[list[str] | None, typer.Option("--where", help="FIELD=VALUE or FIELD!=VALUE on dotted "
                                                    "fields, e.g. verification.status=refuted (repeatable).")]
    = None,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """List records, by kind and by field values."""
    from kbtool.views.listing import list_records, parse_where

    rows = list_records(_load_kb(kb), kind, where)
    if json_:
        _print_json(rows)
    else:
        from kbtool.render import views as render
        from kbtool.render.console import out

        render.listing(out, rows, [parse_where(w).field for w in where or []])


graph_app = typer.Typer(help="The reference graph: neighbors, why, impact, export.", no_args_is_help=True)
app.add_typer(graph_app, name="graph")


@graph_app.command("neighbors")
def graph_neighbors(
    record_id: Annotated[str, typer.Argument(metavar="ID", help="Record id or alias.")],
    depth: Annotated[int, typer.Option("--depth", help="References to follow, either direction.")] = 1,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Records within N references of a record."""
    from kbtool.views.graphview import neighbors

    data = neighbors(_load_kb(kb), record_id, depth)
    _emit(data, json_, "neighbors")


@graph_app.command("why", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def graph_why(
    ctx: typer.Context,
    kernel: Annotated[str, typer.Argument(metavar="KERNEL", help="Kernel id or alias.")],
) -> None:
    """The records that reject or admit a kernel on a GPU.

    The chain comes from the query's answer: accelerator, architecture, kernel, the claims that decide. Takes
    the options of `kb query` (see `kb query --help`); --gpu is required.
    """
    from kbtool.query_cli import parse
    from kbtool.solve.query import build_query
    from kbtool.views.graphview import why

    opts = parse(list(ctx.args)) or {}
    json_, kb = opts.pop("json", False), opts.pop("kb", None)
    for unused in ("explain", "fail_on_no", "no_cache"):
        opts.pop(unused, None)
    if not opts.get("gpu"):
        fail("kb graph why: --gpu is required", 2, f"e.g. kb graph why {kernel} --gpu h100")
    data = why(_load_kb(Path(kb) if kb else None), kernel, build_query(**opts))
    _emit(data, json_, "why")


@graph_app.command("impact")
def graph_impact(
    claim: Annotated[str, typer.Argument(metavar="CLAIM", help="Claim id or alias.")],
    kv: Annotated[list[str] | None, typer.Option("--kv", help="KV dtypes of the grid (default: all).")] = None,
    head_dim: Annotated[list[int] | None, typer.Option("--head-dim", help="Head dims (default 64 128 256 512).")]
    = None,
    no_engine: Annotated[bool, typer.Option("--no-engine", help="Skip the engine-backend (vLLM) grid.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """What would change if a claim flipped (refuted <-> enforced).

    Kernels, engine backends and (GPU x KV dtype x head dim) answers, found by re-solving a grid.
    """
    from kbtool.solve.query import parse_kv
    from kbtool.views.impact import HEAD_DIMS, impact
    from kbtool.vocab import KV_DTYPES

    kvs = tuple(dict.fromkeys(parse_kv(k) for k in kv)) if kv else KV_DTYPES
    hds = tuple(dict.fromkeys(head_dim)) if head_dim else HEAD_DIMS
    if any(h <= 0 for h in hds):
        fail("--head-dim must be positive", 2, "e.g. --head-dim 128")
    data = impact(_load_kb(kb), claim, kvs=kvs, head_dims=hds, engine=False if no_engine else None)
    _emit(data, json_, "impact")


@graph_app.command("export")
def graph_export(
    fmt: Annotated[str, typer.Option("--format", help="dot, graphml or mermaid")] = "dot",
    out_file: Annotated[Path | None, typer.Option("--out", help="Write to this file instead of stdout.")] = None,
    kb: KbOpt = None,
) -> None:
    """Write the reference graph as Graphviz dot, GraphML or Mermaid."""
    from kbtool.views.graphview import export

    text = export(_load_kb(kb), fmt)
    if out_file:
        from kbtool.store.writer import atomic_write

        atomic_write(out_file, text, make_parents=False)
        print(f"wrote {out_file}")
    else:
        sys.stdout.write(escape(text))


@app.command()
def stats(
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Counts per kind, verification, basis, sources, evidence.

    Claims per verification status, share of facts by basis, share of claims with a primary source
    (source code or doc), evidence per GPU, and claims scoped to versions older than the newest release.
    """
    from kbtool.views.stats import stats as compute

    data = compute(_load_kb(kb))
    _emit(data, json_, "stats")


class MatrixFormat(StrEnum):
    text = "text"
    md = "md"
    html = "html"
    json = "json"


@app.command()
def matrix(
    kv: Annotated[str | None, typer.Option("--kv", help="KV dtype (default bf16).")] = None,
    head_dim: Annotated[int | None, typer.Option("--head-dim", help="Head dim (default 128).")] = None,
    phase: Annotated[str | None, typer.Option("--phase", help="prefill, decode or both (default).")] = None,
    attention: Annotated[str | None, typer.Option("--attention", help="Layout: mha, gqa, mqa, mla, sparse-mla "
                                                  "(default: not fixed).")] = None,
    fmt: Annotated[MatrixFormat, typer.Option("--format", help="md (default), html or json")] = MatrixFormat.md,
    json_: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write to this file instead of stdout.")] = None,
    kb: KbOpt = None,
) -> None:
    """Support matrix, kernels x GPUs: Markdown, HTML or JSON.

    Each cell is ok, caveat, rejected, unknown or gate refuted for one KV dtype, head dim and phase.
    """
    import json

    from kbtool.views.matrix import matrix as compute
    from kbtool.views.matrix import to_html, to_markdown

    layouts = ("mha", "gqa", "mqa", "mla", "sparse-mla")
    if attention is not None and attention not in layouts:
        fail(f"--attention: unknown layout '{attention}'", 2, f"use one of {', '.join(layouts)}")
    data = compute(_load_kb(kb), kv=kv, head_dim=head_dim, phase=phase, attention=attention)
    kind = MatrixFormat.json if json_ else fmt
    text = {MatrixFormat.json: lambda: json.dumps(data, indent=2) + "\n", MatrixFormat.html: lambda: to_html(data)
            }.get(kind, lambda: to_markdown(data))()
    if out_file:
        from kbtool.store.writer import atomic_write

        atomic_write(out_file, text, make_parents=False)
        print(f"wrote {out_file}")
    else:
        sys.stdout.write(escape(text))


# ---- fmt / new ----------------------------------------------------------------------------------


@app.command("fmt")
def fmt_cmd(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files or folders (default: the records tree).")] = None,
    check: Annotated[bool, typer.Option("--check", help="Change nothing; print a diff and exit 1 if any "
                                                        "file is not canonical.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Put records in canonical form: schema line, key order, quotes.

    Comments are kept. Evidence records are never touched (only `kb probe run` writes them).
    """
    import json

    from kbtool.fmt.run import format_paths

    report = format_paths(_records(kb), paths, check=check)
    if json_:
        print(json.dumps({"ok": report.exit_code == 0, "check": check,
                          "files": [{"file": r.name, "status": r.status, "message": r.message or None,
                                     "diff": r.diff or None} for r in report.results]}, indent=2))
        raise typer.Exit(report.exit_code)
    from kbtool.render.console import err

    for r in report.results:
        if r.status == "changed":
            sys.stdout.write(escape(r.diff)) if check else print(f"reformatted {r.name}")
        elif r.status == "error":
            err.print(f"error: {r.message}", markup=False, highlight=False)
    changed, ok = len(report.of("changed")), len(report.of("ok"))
    verb = "would reformat" if check else "reformatted"
    tail = "; run `kb fmt` to fix" if check and changed else ""
    err.print(f"{verb} {changed} file(s), {ok} already canonical, {len(report.of('skipped'))} skipped, "
              f"{len(report.of('error'))} error(s){tail}", markup=False, highlight=False)
    raise typer.Exit(report.exit_code)


@app.command()
def new(
    kind: Annotated[str, typer.Argument(metavar="KIND", help="Record kind, e.g. claim, kernel, accelerator.")],
    record_id: Annotated[str, typer.Argument(metavar="ID", help="The new record's id.")],
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the record instead of writing it.")] = False,
    kb: KbOpt = None,
) -> None:
    """Scaffold a new record with its required fields, commented."""
    from kbtool import scaffold

    root = _records(kb)
    try:
        if stdout:
            print(scaffold.scaffold(kind, record_id, scaffold.record_path(root, kind, record_id)), end="")
            raise typer.Exit(0)
        path = scaffold.create(root, kind, record_id)
    except KbError as e:
        fail(str(e.args[0]), e.exit_code, e.fix)
    print(f"wrote {path}; replace each TODO, then run `kb validate {path}`")


model_app = typer.Typer(help="Model records from Hugging Face configs.", no_args_is_help=True)
app.add_typer(model_app, name="model")


@model_app.command("import")
def model_import(
    config: Annotated[str, typer.Argument(metavar="PATH", help="A config.json (or the folder holding it).")],
    record_id: Annotated[str | None, typer.Option("--id", help="Record id (default: the folder's name).")] = None,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the record instead of writing it.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing record.")] = False,
    kb: KbOpt = None,
) -> None:
    """Write a model record from a Hugging Face config.json, citing the config (SOURCE.yaml beside it)."""
    from kbtool import modelimport

    root = _records(kb)
    if stdout:
        print(modelimport.record_text(config, record_id, root)[1], end="")
        raise typer.Exit(0)
    path = modelimport.import_model(config, record_id, root, overwrite=force)
    print(f"wrote {path}; run `kb validate {path}`")


# ---- query --------------------------------------------------------------------------------------


@app.command(add_help_option=False, context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                                      "help_option_names": []})
def query(ctx: typer.Context) -> None:
    """Answer a serving question: kernels, reasons, caveats, KV fit.

    Can this accelerator serve this context with this KV dtype (and model, engine, libraries)? The options are
    kbtool/query_cli.py's OPTIONS (`kb query --help`); this command hands its arguments to that module.
    """
    from kbtool.query_cli import main as run

    raise typer.Exit(run(list(ctx.args)))


# ---- bench --------------------------------------------------------------------------------------

bench_app = typer.Typer(help="Time attention backends on this GPU; winners and transfer cost.",
                        no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@bench_app.command("run")
def bench_run(
    quick: Annotated[bool, typer.Option("--quick", help="The small grid (< 10 minutes on an H200).")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Folder for the run's record (default: the records "
                                             "tree's measurements/); PNGs go to docs/figures/.")] = None,
    backend: Annotated[list[str] | None, typer.Option("--backend", help="Only these backends (repeatable).")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Separate process launches per attempt.")] = 3,
    budget: Annotated[float, typer.Option("--budget-s", help="Stop starting new work after this many seconds.")]
    = 540.0,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Do not draw PNGs.")] = False,
    kb: KbOpt = None,
) -> None:
    """Run the prefill and decode grid on the local GPU and write its measurement record (one per run)."""
    from kbtool.bench.commands import run_command
    from kbtool.bench.runner import NoGpuError
    from kbtool.bench.text import run as render

    try:
        summary = run_command(quick=quick, out=out, records_root=_records(kb), backends=backend or None,
                              repeats=repeats, budget_s=budget, plots=not no_plots,
                              progress=lambda m: print(m, file=sys.stderr, flush=True))
    except NoGpuError as e:
        print(f"kb bench run: {e}")
        raise typer.Exit(0) from None
    print(render(summary))


@bench_app.command("winners")
def bench_winners(
    gpu: Annotated[str | None, typer.Option("--gpu", help="Accelerator id or alias (default: every GPU).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every configuration.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Apply the separation rule per configuration: separated winners and the clear-winner share."""
    import json

    from kbtool.bench.commands import winners_report
    from kbtool.bench.text import winners as render

    report = winners_report(_load_kb(kb), gpu, seed=seed)
    print(json.dumps(report, indent=2) if json_ else render(report, verbose))


@bench_app.command("transfer")
def bench_transfer(
    source: Annotated[str, typer.Option("--from", help="Source accelerator id or alias.")],
    target: Annotated[str, typer.Option("--to", help="Target accelerator id or alias.")],
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    kb: KbOpt = None,
) -> None:
    """Winner changes and transfer cost of reusing the source GPU's pick on the target GPU."""
    import json

    from kbtool.bench.commands import transfer_report
    from kbtool.bench.text import transfer as render

    report = transfer_report(_load_kb(kb), source, target, seed=seed)
    print(json.dumps(report, indent=2) if json_ else render(report))


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
    updates, skips, written = apply(_records(kb), paths, write=write)
    render.apply_text(updates, skips, written, write, unchanged)


@probe_app.command("sweep")
def probe_sweep(
    lib: Annotated[str, typer.Option("--lib", help="Library whose releases to sweep.")] = "vllm",
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
    import time
    from dataclasses import asdict

    from kbtool.probe import sweep as sw
    from kbtool.render import probe as render

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
    if json_:
        print(json.dumps({"releases": chosen, "skipped": skipped, "tasks": [asdict(t) for t in tasks],
                          "results": [asdict(r) for r in results], "seconds": round(seconds, 1)}, indent=2))
    else:
        render.sweep_text(tasks, skipped, results, seconds, dry_run)
    if any(r.status == "failed" for r in results):
        raise typer.Exit(1)


@probe_app.command("events")
def probe_events(
    claims: Annotated[list[str] | None, typer.Argument(help="Only these claims.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Rewrite the claims' vLLM scopes.")] = False,
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
    store: Annotated[bool, typer.Option("--store-outcomes", help="Write replayed shards to "
                                        "tests/data/vllm/X/outcomes.json (release timelines).")] = False,
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
    write: Annotated[bool, typer.Option("--write", help="Rewrite records/measurements/vllm-boot-estimate-error.yaml.")]
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


# ---- entry point --------------------------------------------------------------------------------


def main() -> None:
    """Run the app; map errors to exit codes, never show a traceback for bad input."""
    # A run builds many long-lived objects (records, parsed documents). CPython's default thresholds make the
    # collector walk them again and again: collect less often, as mypy does (mypy/build.py, build():
    # gc.set_threshold(200 * 1000, 30, 30)). At exit the interpreter's last collections would walk them all once
    # more only to find nothing to free (a quarter of a warm `kb validate`): gc.freeze() at exit takes them out of
    # those collections (docs.python.org/3/library/gc.html#gc.freeze); they are still freed. Registered once per
    # process however often main() runs (tests call it in-process).
    gc.set_threshold(200_000, 30, 30)
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    _run()


@functools.cache
def _command() -> Any:
    """The click command typer builds from the app (every command's signature read): built once per process, as
    tests run main() many times in one; errors are mapped below, so typer's exception hook is not installed."""
    return typer.main.get_command(app)


def _run() -> None:
    try:
        rc = _command()(standalone_mode=False)  # click returns the code of a typer.Exit here
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except KbError as e:
        _error(str(e.args[0]) if e.args else "", e.fix)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # typer/click usage errors carry their own exit code
        code = getattr(e, "exit_code", None)
        show = getattr(e, "show", None)
        if isinstance(code, int) and callable(show):
            show()
            sys.exit(2 if code == 2 else code)
        if os.environ.get("KB_DEBUG"):
            raise
        print(f"kb: internal error: {type(e).__name__}: {escape(str(e))}\n  please report this (set KB_DEBUG=1 for the "
              "traceback)", file=sys.stderr)
        sys.exit(3)
