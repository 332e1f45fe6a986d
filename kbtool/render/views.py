"""Rich text for `kb show` (non-topic records), `kb list`, `kb graph`, `kb stats` and `kb matrix`."""

from __future__ import annotations

import builtins
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

STATUS_STYLE = {"ok": "green", "verified": "green", "caveat": "yellow", "disputed": "yellow",
                "rejected": "red", "refuted": "bold red", "gate refuted": "magenta", "unknown": "dim",
                "unverified": "dim", "untestable": "dim", "confirmed": "green", "contradicted": "red"}



def print(*values: object, sep: str = " ", end: str = "\n", file: Any = None, flush: bool = False) -> None:
    """builtins.print with every value passed through kbtool.escape.escape (nothing raw to a terminal)."""
    from kbtool.escape import escape as visible

    builtins.print(*(visible(str(v)) for v in values), sep=sep, end=end, file=file, flush=flush)


def _s(value: Any) -> str:
    text = str(value)
    return f"[{STATUS_STYLE.get(text, 'white')}]{escape(text)}[/]"


def show(c: Console, d: dict[str, Any]) -> None:
    where = f"{d['file']}:{d['line']}" if d.get("file") else "(not from a file)"
    c.print(f"[bold]{escape(d['id'])}[/] ({escape(d['kind'])}) {escape(d['name'])}  [dim]{escape(where)}[/]")
    rec = {k: v for k, v in d["record"].items() if k not in ("id", "kind", "name")}
    c.print(escape(str(yaml.safe_dump(rec, sort_keys=False, allow_unicode=True, width=110)).rstrip()))
    if d["references"]:
        c.print("\n[bold]references[/]")
        for r in d["references"]:
            tail = f"{escape(r['kind'])}: {escape(r['name'])}" if r["exists"] else "[red]not in the KB[/]"
            c.print(f"  {escape(r['rel'])} -> {escape(r['id'])} ({tail})")
    if d["referenced_by"]:
        c.print("\n[bold]referenced by[/]")
        for r in d["referenced_by"]:
            c.print(f"  {escape(str(r['kind']))} {escape(r['id'])} ({escape(r['rel'])})")
    if "verification" in d:
        v = d["verification"]
        shown = v.get("shown_status")
        if shown and shown != v["status"]:  # a two-part claim: the weaker part's status is the claim's
            c.print(f"\n[bold]verification:[/] {_s(shown)} (the weaker of its parts; its own record says "
                    f"{_s(v['status'])})" + (f", checked {v['checked']}" if v["checked"] else ""))
        else:
            c.print(f"\n[bold]verification:[/] {_s(v['status'])}" + (f" (checked {v['checked']})" if v["checked"]
                                                                       else ""))
        for part in d.get("parts", []):
            ids = ", ".join(part["evidence"]) or "no evidence"
            c.print(f"  part {escape(part['id'])}: {_s(part['status'])} ({escape(ids)})")
            c.print(f"    {escape(part['statement'])}")
            if part["reason"]:
                c.print(f"    [dim]{escape(part['reason'])}[/]")
        if v["reason"]:
            c.print(f"  {escape(v['reason'])}")
        for i, side in enumerate(v["sides"], 1):
            c.print(f"  side {i}: {escape(side)}")
        for sv in v.get("verdicts", []):
            ids = ", ".join(sv["evidence"]) or "no evidence"
            c.print(f"  {escape(sv['scope'])}: {_s(sv['status'])} ({escape(ids)})")
        for ev in v.get("scope_events", []):
            bounds = ", ".join(f"{k} {ev[k]}" for k in ("introduced", "fixed", "last_affected") if ev.get(k))
            c.print(f"  scope: {escape(ev['library'])} {escape(bounds)} (from {escape(', '.join(ev['evidence']))})")
    if d.get("timeline"):
        c.print("\n[bold]releases[/] (the engine's, from each release's own evidence)")
        for p in d["timeline"]:
            c.print(f"  {escape(p['release'])}: {escape(p['outcome'])}  [dim]{escape(p['evidence'])}[/]")
        for e in d.get("version_events", []):
            (b, bo, be), (a, ao, ae) = e["before"], e["after"]
            c.print(f"  [bold]{escape(e['field'])} {escape(e['release'])}[/]: {escape(b)} {escape(bo)} ({escape(be)}), "
                    f"{escape(a)} {escape(ao)} ({escape(ae)})")
    if d.get("claims"):
        c.print("\n[bold]claims about it[/]")
        for cl in d["claims"]:
            c.print(f"  {escape(cl['id'])} [{escape(cl['effect'])}] {_s(cl['status'])}")
    c.print(f"\n[bold]evidence[/] ({len(d['evidence'])})")
    for e in d["evidence"]:
        if e.get("missing"):
            c.print(f"  [red]{escape(e['id'])}: not in the KB[/]")
            continue
        outs = ", ".join(f"{k} {n}" for k, n in e["outcomes"].items())
        verdict = f" -> {_s(e['verdict'])}" if e.get("verdict") else ""
        c.print(f"  {escape(e['id'])}: {escape(e['probe'])} on {escape(e['gpu'])}, {e['cases']} cases "
                f"({escape(outs)}){verdict}")
        if e.get("detail"):
            c.print(f"    {escape(e['detail'])}")


def _cell(v: Any) -> str:
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return "" if v is None else str(v)


def listing(c: Console, rows: list[dict[str, Any]], fields: list[str]) -> None:
    cols = ["id", "kind", *fields, "name"]
    if not c.is_terminal:  # piped: whole values, one record a line, columns separated by tabs
        print("\t".join(cols))
        for r in rows:
            print("\t".join(_cell(r.get(col)) for col in cols))
        print(f"{len(rows)} record(s)")
        return
    t = Table(box=None, pad_edge=False)
    for col in cols:
        t.add_column(col, no_wrap=col == "id", overflow="fold" if col != "id" else "ignore")
    for r in rows:
        t.add_row(*(escape(_cell(r.get(col))) for col in ["id", "kind", *fields, "name"]))
    c.print(t)
    c.print(f"[dim]{len(rows)} record(s)[/]")


def neighbors(c: Console, d: dict[str, Any]) -> None:
    c.print(f"[bold]{escape(d['id'])}[/]: {len(d['nodes']) - 1} record(s) within {d['depth']} reference(s)")
    for n in d["nodes"][1:]:
        c.print(f"  {'  ' * (n['distance'] - 1)}{n['distance']} {escape(str(n['kind']))} {escape(n['id'])}")
    c.print("[bold]edges[/]")
    for e in d["edges"]:
        c.print(f"  {escape(e['from'])} --{escape(e['rel'])}--> {escape(e['to'])}")


def why(c: Console, d: dict[str, Any]) -> None:
    phases = ", ".join(f"{p} {s}" for p, s in d["phase_status"].items())
    c.print(f"[bold]{escape(d['kernel'])}[/] on [bold]{escape(d['gpu'])}[/]: {_s(d['status'])}"
            + (f" ({escape(phases)})" if phases else ""))
    for i, s in enumerate(d["chain"], 1):
        label = s["id"] or s.get("code")
        ver = f" {_s(s['verification'])}" if s.get("verification") else ""
        c.print(f"  {i:>2}. {escape(s['role']):<22} {escape(str(label))}{ver}")
        if s.get("message"):
            c.print(f"      {escape(str(s['message']))}")
        if s.get("evidence"):
            c.print(f"      evidence: {escape(', '.join(s['evidence']))}")
    for w in d["workarounds"]:
        c.print(f"  workaround: {escape(w)}")


def impact(c: Console, d: dict[str, Any], limit: int = 60) -> None:
    g = d["grid"]
    c.print(f"[bold]{escape(d['claim'])}[/] ({escape(d['effect'])} on {escape(d['subject'])}) is "
            f"{_s(d['status'])}: {escape(d['now'])}. Flipped to {escape(d['then'])}:")
    c.print(f"  grid: {g['accelerators']} GPUs x kv {', '.join(g['kv'])} x head dim "
            f"{', '.join(map(str, g['head_dims']))} ({g['cells']} answers), phase both, engine {g['engine']}")
    n = len(d["changes"])
    c.print(f"  kernels that change: {escape(', '.join(d['kernels']) or 'none')}")
    c.print(f"  engine backends that change: {escape(', '.join(d['backends']) or 'none')}")
    c.print(f"  answers that change: {n} of {g['cells']} (verdict changes: {d['verdicts_changed']}) "
            f"on {len(d['gpus'])} GPU(s)")
    groups: dict[tuple[str, str], dict[str, list[int]]] = {}
    for ch in d["changes"]:
        what = ", ".join(f"{k['id']} {k['before']} -> {k['after']}" for k in ch["kernels"])
        if ch["verdict_before"] != ch["verdict_after"]:
            what += f"; verdict {ch['verdict_before']} -> {ch['verdict_after']}"
        groups.setdefault((ch["gpu"], what), {}).setdefault(ch["kv"], []).append(ch["head_dim"])
    for i, ((gpu, what), cells) in enumerate(groups.items()):
        if i == limit:
            c.print(f"    ... {len(groups) - limit} more groups (--json for every answer)")
            break
        at = "; ".join(f"{kv} hd {','.join(map(str, hds))}" for kv, hds in cells.items())
        c.print(f"    {escape(gpu)}: {escape(what)}  [dim]({escape(at)})[/]")
    if d["engine_changes"]:
        c.print(f"  with --engine {escape(str(d['grid']['engine']))}: {len(d['engine_changes'])} answer(s) change")


def stats(c: Console, d: dict[str, Any]) -> None:
    c.print(f"[bold]{d['records']} records[/]: " + ", ".join(f"{k} {n}" for k, n in d["kinds"].items()))
    c.print("[bold]claims by verification[/]: " + ", ".join(f"{_s(k)} {n}" for k, n in d["claims_by_status"].items()))
    c.print("[bold]facts by basis[/]: " + ", ".join(f"{k} {v['count']} ({v['share']:.0%})"
                                                     for k, v in d["facts_by_basis"].items()))
    if d["measurements_by_basis"]:
        c.print("[bold]measurements by basis[/]: " + ", ".join(f"{k} {v['count']} ({v['share']:.0%})"
                                                               for k, v in d["measurements_by_basis"].items()))
    p = d["claims_with_primary_source"]
    c.print(f"[bold]claims with a primary source[/] (source code or doc): {p['count']} of {p['of']} "
            f"({p['share']:.0%})")
    c.print("[bold]evidence per GPU[/]: " + (", ".join(f"{k} {n}" for k, n in d["evidence_per_gpu"].items())
                                             or "none"))
    c.print(f"[bold]claims scoped to versions older than the newest recorded release[/]: {len(d['stale_scopes'])}")
    for s in d["stale_scopes"]:
        c.print(f"  {escape(s['claim'])}: {escape(s['library'])} {escape(s['scope'])}, latest {escape(s['latest'])}")
    for cov in d.get("coverage", []):
        done = sum(cov["covered"].values())
        parts = ", ".join(f"{_s(k)} {n}" for k, n in cov["covered"].items())
        c.print(f"[bold]claims in scope on {escape(cov['arch'])}[/] (probed there): {cov['in_scope']}; "
                f"with a verdict there {done}" + (f" ({parts})" if parts else "")
                + f", none {len(cov['uncovered'])}")
        for u in cov["uncovered"]:
            c.print(f"  {escape(u['claim'])} ({_s(u['status'])})")
