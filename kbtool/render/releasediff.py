"""Words for `kb diff --ENGINE A B` (kbtool/views/releasediff.py): defaults, the engine's own changes, claims and,
with --gpu, the question under each release side by side."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

CLAIMS_SHOWN = {"introduced": 12, "fixed": 12, "unconfirmed": 5}  # listed per kind of change; the rest counted
GATES_SHOWN = 15
MODELS_SHOWN = 8  # accounting changes listed (most points first); the rest counted


def _v(value: Any) -> str:
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 90 else text[:87] + "..."


def release_diff(c: Console, d: Any) -> None:
    c.print(f"[bold]{escape(d.label)} {escape(d.a)} -> {escape(d.b)}[/]")
    _defaults(c, d)
    _engine(c, d)
    _gates(c, d)
    _claims(c, d)
    if d.question is not None:
        _question(c, d.question)


def _defaults(c: Console, d: Any) -> None:
    c.print("\n[bold]defaults[/] (records/engine-releases; source at " + escape(d.b) + ")")
    for n in d.notes:
        c.print(f"  {escape(n)}")
    if all(d.records.values()) and not d.defaults:
        c.print("  no recorded default changed")
    for f in d.defaults:
        where = f"batch {f.field}" if f.part == "batch" else (f"{f.part}.{f.field}" if f.part != "defaults"
                                                               else f.field)
        c.print(f"  {escape(where)}: {escape(_v(f.old))} -> [bold]{escape(_v(f.new))}[/]"
                + (f"  [dim]{escape(f.source)}[/]" if f.source else ""))
        if f.note:
            c.print(f"      [dim]{escape(f.note)}[/]")


def _engine(c: Console, d: Any) -> None:
    facts = [x for x in d.changes if x.group == "release"]
    missing = [x for x in d.changes if x.group == "missing"]
    backends = [x for x in d.changes if x.group == "backends"]
    selection = [x for x in d.changes if x.group == "selection"]
    if facts:
        c.print("\n[bold]release facts[/] (the engine's config resolution, as recorded)")
        for x in facts:
            what = x.note or x.key
            c.print(f"  {escape(what)}: {escape(_v(x.old))} -> [bold]{escape(_v(x.new))}[/]"
                    f"  [dim]{escape(x.source or '')}[/]")
    c.print("\n[bold]backends[/] (the engine's own selector, recorded grids)")
    for x in missing:
        c.print(f"  {escape(x.note or x.key)}")
    shared = {(tuple(x.old), tuple(x.new)) for x in backends}
    if len(shared) == 1 and len(backends) > 1:  # the same list on every platform: once
        old, new = next(iter(shared))
        keys = ", ".join(x.key for x in backends)
        _backend_line(c, f"on every grid ({keys})", list(old), list(new), backends[0].source)
    else:
        for x in backends:
            _backend_line(c, f"cc {x.key}" if x.key[0].isdigit() else x.key, x.old, x.new, x.source)
    for x in selection:
        where = f"cc {x.key}" if x.key[0].isdigit() else x.key
        c.print(f"  {escape(where)}: selected backend changed at {x.count:,} of {x.of_total:,} points"
                + (f"; {escape(x.note)}" if x.note else ""))
        for e in x.examples:
            c.print(f"      [dim]{escape(e if len(e) <= 110 else e[:107] + '...')}[/]")
    for x in (x for x in d.changes if x.group == "priorities"):
        where = f"cc {x.key}" if x.key[0].isdigit() else x.key
        c.print(f"  {escape(where)}: priority list changed at {x.count:,} of {x.of_total:,} points")
        for e in x.examples:
            c.print(f"      [dim]{escape(e if len(e) <= 110 else e[:107] + '...')}[/]")
    if not (missing or backends or selection):
        c.print("  no backend or selection change recorded")
    _counted(c, "launch defaults", "the engine's own resolution per accelerator and model",
             [x for x in d.changes if x.group == "defaults"], "accelerator x model")
    _counted(c, "KV accounting", "the engine's own planning on the recorded models",
             [x for x in d.changes if x.group == "accounting"], "points")


def _counted(c: Console, title: str, what: str, rows: list[Any], unit: str) -> None:
    if not rows:
        return
    c.print(f"\n[bold]{title}[/] ({what}, recorded)")
    for x in rows[:MODELS_SHOWN]:
        of = f" of {x.of_total:,}" if x.of_total else ""
        c.print(f"  {escape(x.key)}: changed at {x.count:,}{of} {unit}")
        for e in x.examples[:2]:
            c.print(f"      [dim]{escape(e if len(e) <= 110 else e[:107] + '...')}[/]")
    if len(rows) > MODELS_SHOWN:
        c.print(f"  ... and {len(rows) - MODELS_SHOWN} more (--json lists them)")


def _gates(c: Console, d: Any) -> None:
    if not d.gates:
        return
    c.print(f"\n[bold]gates[/] whose outcome on the release's own grid changed ({len(d.gates)}; the evidence, before "
            "any scope is rewritten)")
    for x in d.gates[:GATES_SHOWN]:
        c.print(f"  {escape(x.claim)}: {escape(x.old)} -> [bold]{escape(x.new)}[/]"
                + (f"  [dim]{escape(x.detail[:90])}[/]" if x.detail else ""))
    if len(d.gates) > GATES_SHOWN:
        c.print(f"  ... and {len(d.gates) - GATES_SHOWN} more (--json lists them)")


def _backend_line(c: Console, where: str, old: list[str], new: list[str], source: str | None) -> None:
    if new:
        c.print(f"  {escape(where)}: new [bold]{escape(', '.join(new))}[/]")
    if old:
        c.print(f"  {escape(where)}: removed [bold]{escape(', '.join(old))}[/]")
    if source:
        c.print(f"      [dim]{escape(source)}[/]")


def _claims(c: Console, d: Any) -> None:
    c.print(f"\n[bold]claims[/] whose {escape(d.engine)} scope differs between {escape(d.a)} and {escape(d.b)}")
    if not d.claims:
        c.print("  none")
    for why, words in (("introduced", "a recorded bound between them"), ("fixed", "a recorded bound between them"),
                       ("unconfirmed", "past the last release recorded to hold (last_affected), not recorded "
                        "as fixed")):
        rows = [x for x in d.claims if x.why == why]
        if not rows:
            continue
        c.print(f"  {why} ({len(rows)}; {words}):")
        shown = CLAIMS_SHOWN[why]
        for x in rows[:shown]:
            at = "" if why == "unconfirmed" else \
                f"{d.a} {'yes' if x.at_a else 'no'}, {d.b} {'yes' if x.at_b else 'no'}; "
            c.print(f"    {escape(x.claim)}  [dim]({escape(at)}{escape(x.scope)})[/]")
        if len(rows) > shown:
            c.print(f"    ... and {len(rows) - shown} more (--json lists them)")


def _question(c: Console, q: Any) -> None:
    c.print(f"\n[bold]--gpu {escape(q.gpu)}" + (f" --model {escape(q.model)}" if q.model else "") + "[/]")
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("")
    t.add_column(q.a.release)
    t.add_column(q.b.release)
    rows = [("verdict", "verdict"), ("backend (prefill)", "prefill"), ("backend (decode)", "decode"),
            ("block size", "block_size"), ("batch defaults", "max_num_batched_tokens"),
            ("gpu_memory_utilization", "utilization"), ("reserve", "reserve_bytes"), ("KV pool", "pool_bytes"),
            ("pool tokens (reported)", "pool_tokens"), ("blocks", "num_blocks"), ("concurrency", "concurrency"),
            ("starts", "starts"), ("planning", "planning"), ("accounting", "accounting")]
    for label, key in rows:
        va, vb = getattr(q.a, key), getattr(q.b, key)
        if key in ("prefill", "decode"):
            va, vb = (v if v is not None else s.state for v, s in ((va, q.a), (vb, q.b)))
        fa, fb = _cell(key, va), _cell(key, vb)
        t.add_row(label, escape(fa), escape(fb) if va == vb else f"[bold]{escape(fb)}[/]")
    c.print(t)
    for s in (q.a, q.b):
        if s.error:
            c.print(f"  {escape(s.release)} refuses: {escape(s.error)}")
    c.print("[bold]what moved[/]" if q.moved else "nothing moved")
    for m in q.moved:
        c.print(f"  - {escape(m)}")


def _cell(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if key in ("reserve_bytes", "pool_bytes") and isinstance(v, int):
        return f"{v / 1e9:.2f} GB"
    if key in ("pool_tokens", "num_blocks") and isinstance(v, int):
        return f"{v:,}"
    if key == "max_num_batched_tokens":
        return str(v).split(" (")[0]
    if key == "starts":
        return "yes" if v else "no"
    return str(v)


def sweep_report(c: Console, r: Any) -> None:
    """The sweep's closing report: each swept release against the one recorded before it, as `kb diff` words it."""
    if not (r.diffs or r.notes):
        return
    c.print("\n[bold]what changed[/] (against the release recorded before; `kb diff` compares any two)")
    for n in r.notes:
        c.print(f"  {escape(n)}")
    for d in r.diffs:
        c.print()
        release_diff(c, d)
