"""Render a topic the way seed 001's page reads, each statement marked with its claim's status and evidence."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kbtool.kb import KB
from kbtool.model.topic import XREF, Topic
from kbtool.topic.derive import Derived, claim_state, derive, statement_status

STYLE = {"verified": "green", "refuted": "bold red", "disputed": "yellow", "unverified": "dim",
         "untestable": "dim", "missing": "red", "unlinked": "dim", "partly-verified": "green",
         "partly-refuted": "bold red"}


def _mark(status: str) -> str:
    return f"[{STYLE.get(status, 'white')}]\\[{status}][/]"


def _heading(console: Console, text: str) -> None:
    console.print()
    console.print(f"[bold underline]{escape(text)}[/]")


def _banner(console: Console, d: Derived) -> None:
    if not d.refuted:
        return
    ids = ", ".join(c.id for c in d.refuted)
    console.print(f"[bold red]REFUTED: probes contradicted {len(d.refuted)} of the {len(d.claims)} claims this "
                  f"topic rests on: {escape(ids)}[/]")
    for c in d.refuted:
        ev = ", ".join(c.evidence) or "no evidence listed"
        console.print(f"[red]  x {escape(c.id)}: {escape(c.statement or '')} (evidence: {escape(ev)})[/]")


def _header(console: Console, t: Topic, d: Derived) -> None:
    if t.area:
        console.print(f"[dim]{escape(t.area)}[/]")
    _banner(console, d)
    line = f"{_mark(d.status)} {d.level} · {d.confidence:.2f} (derived from {len(d.claims)} claims"
    line += f", {d.unlinked} unlinked statements)" if d.unlinked else ")"
    console.print(line)
    s = t.stated
    if s is not None:
        stated = " ".join(x for x in (s.status, s.level) if x)
        conf = f" · {s.confidence:.2f}" if s.confidence is not None else ""
        upd = f", updated {s.updated}" if s.updated else ""
        console.print(f"[dim]source states: {escape(stated)}{conf}{upd}[/]")
    if t.verification is not None:
        v = t.verification
        console.print(f"[dim]kb states: {v.status} {v.level or ''} · {v.confidence:.2f}[/]")
    console.print()
    console.print(f"[bold]{escape(t.title or t.name)}[/]")
    if t.bound_by:
        console.print(f"[cyan]{escape(t.bound_by)} bound[/]")
    if t.external:
        console.print("[yellow]external: a stub for a record kb does not hold[/]")


def _fields(console: Console, t: Topic) -> None:
    _heading(console, "Fields")
    console.print(f"[bold]id[/] {escape(t.id)}" + (f" [dim](source id {escape(t.original_id)})[/]"
                                                   if t.original_id else ""))
    for label, val in (("Class", t.topic_class), ("Bound by", t.bound_by)):
        if val:
            console.print(f"[bold]{label}[/] {escape(val)}")
    if t.arithmetic_intensity:
        console.print("[bold]Arithmetic intensity[/]")
        console.print(f"  {escape(t.arithmetic_intensity)}")
    if t.scales_with:
        console.print("[bold]Scales with[/]")
        for s in t.scales_with:
            console.print(f"  - {escape(s)}")


def _parameters(console: Console, t: Topic, kb: KB) -> None:
    if not t.hardware_parameters:
        return
    _heading(console, "Hardware parameters")
    table = Table("parameter", "effect", "basis", "values_for", "magnitude", show_lines=True)
    for r in t.hardware_parameters:
        known = "" if r.parameter in kb.by_id else " (not in kb)"
        table.add_row(escape(r.parameter + known), escape(r.effect), str(r.basis), escape(", ".join(r.values_for)),
                      escape(r.magnitude or ""))
    console.print(table)


def _bullets(console: Console, title: str, items: list[str]) -> None:
    if items:
        _heading(console, title)
        for w in items:
            console.print(f"- {escape(w)}")


def _statements(console: Console, t: Topic, kb: KB) -> None:
    if not t.statements:
        return
    _heading(console, "Statements")
    for i, s in enumerate(t.statements, 1):
        states = [claim_state(kb, c) for c in s.claims]
        console.print(f"{i}. {_mark(statement_status(states))} {escape(s.text)}")
        for st in states:
            ev = f"; evidence: {', '.join(st.evidence)}" if st.evidence else ""
            console.print(f"     {_mark(st.status)} {escape(st.id)}{escape(ev)}")


def _xrefs(console: Console, t: Topic, kb: KB) -> None:
    seen = list(dict.fromkeys(t.xrefs()))
    if not (seen or t.cross_references or t.affected_accelerators):
        return
    _heading(console, "Cross-references")
    for x in seen:
        rec = kb.get(x) or kb.get(kb.aliases.get(x.lower(), ""))
        if rec is None:
            what = "[red]not in kb[/]"
        elif isinstance(rec, Topic) and rec.external:
            what = "external stub"
        else:
            what = rec.kind
        console.print(f"- \\[\\[{escape(x)}]] -> {what}")
    for g in t.cross_references:
        count = g.count if g.count is not None else len(g.ids)
        names = f": {', '.join(g.ids)}" if g.ids else ""
        console.print(f"- {escape(g.group)} ({count}){escape(names)}")
    if t.affected_accelerators:
        console.print(f"- affected accelerators: {escape(', '.join(t.affected_accelerators))}")


def _summary(console: Console, d: Derived) -> None:
    _heading(console, "Derived verification")
    table = Table("status", "claims", "share")
    for status, share in d.shares().items():
        table.add_row(_mark(status), str(d.counts.get(status, 0)), f"{share:.0%}")
    if d.counts.get("missing"):
        table.add_row(_mark("missing"), str(d.counts["missing"]), "")
    table.add_row(_mark("unlinked"), str(d.unlinked), "statements")
    console.print(table)
    console.print("[dim]confidence = mean weight over claims and unlinked statements (docs/topics.md)[/]")


def render_topic(t: Topic, kb: KB, console: Console | None = None) -> None:
    from kbtool.render.console import out

    c = console or out
    d = derive(t, kb)
    _header(c, t, d)
    _fields(c, t)
    _parameters(c, t, kb)
    _bullets(c, "Workarounds", t.workarounds)
    _statements(c, t, kb)
    if t.notes:
        _heading(c, "Notes")
        for para in t.notes.split("\n\n"):
            c.print(escape(para.strip()))
            c.print()
    _xrefs(c, t, kb)
    _summary(c, d)
    _heading(c, "Sources")
    for s in t.sources:
        c.print(f"- {escape(s.locator())}")


__all__ = ["XREF", "render_topic"]
