"""`kb list`, `kb graph ...`, `kb stats`, `kb matrix`: views of the records."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kbtool.cli.app import KbOpt, _emit, _load_kb, _print_json, app, fail, print
from kbtool.escape import escape

if TYPE_CHECKING:
    pass


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
    from kbtool.solve.request import build_query
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
    no_engine: Annotated[bool, typer.Option("--no-engine", help="Skip the engine-backend grid.")] = False,
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
