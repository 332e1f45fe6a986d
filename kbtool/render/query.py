"""Text rendering of a query answer (rich): verdict, kernel table, engine backends, memory, caveats."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from kbtool.solve.answer import Answer, BackendAnswer, KernelAnswer, MultiAnswer, Reason

STYLE = {"ok": "green", "caveat": "yellow", "unknown": "cyan", "rejected": "red",
         "yes": "bold green", "no": "bold red", "conditional": "bold yellow"}
LABEL = {"verified": "verified", "unverified": "unverified", "refuted": "REFUTED", "disputed": "disputed",
         "untestable": "untestable", "structural": "kb"}


def _st(s: str) -> str:
    return f"[{STYLE.get(s, 'white')}]{s}[/]"


def _label(r: Reason) -> str:
    """The verification label; evidence-backed ones say where the evidence ran (it covers nothing else)."""
    on = f" on {', '.join(r.verified_on)}" if r.verified_on and r.verification in ("verified", "refuted") else ""
    return LABEL[r.verification] + on


def _short(r: Reason, width: int = 150) -> str:
    tag = r.claim or r.code
    label = _label(r)
    layer = "engine: " if r.layer == "engine" else ""
    phase = f"({r.phase}) " if r.phase else ""
    if r.depends_on and r.verification != "structural":
        body = f"{r.code}: depends on {', '.join(r.depends_on)}; passes when {r.allowed}"
    else:
        body = r.message
    text = f"{layer}{phase}{body}"
    if len(text) > width:
        text = text[: width - 1] + "…"
    return f"{escape(text)} [dim]\\[{escape(tag)}, {label}][/]"


def _kernel_lines(console: Console, k: KernelAnswer, via: bool) -> None:
    phases = ", ".join(f"{p}" if s == k.status else f"{p}:{s}" for p, s in k.phase_status.items())
    extra = f"  via {', '.join(k.via)}" if via and k.via else ""
    head = f"  [{STYLE[k.status]}]{k.status:<9}[/]{k.id:<32}[dim]{escape(phases)}{escape(extra)}[/]"
    enforced = sorted((r for r in k.reasons if r.enforced), key=lambda r: bool(r.depends_on))
    if not enforced and not k.caveats:
        console.print(head + ("  passes every gate" if k.gates else "  [dim]no gates recorded in the KB[/]"))
        return
    console.print(head)
    for r in enforced[:3]:
        console.print(f"{'':11}- {_short(r)}")
    if len(enforced) > 3:
        console.print(f"{'':11}[dim]- +{len(enforced) - 3} more (--explain)[/]")
    if k.status in ("ok", "caveat"):
        for r in k.caveats[:2]:
            console.print(f"{'':11}- caveat: {_short(r)}")


def _query_line(a: Answer | MultiAnswer) -> str:
    q = {k: v for k, v in a.query.items() if v not in (None, [], {}, "none") and k != "utilization"}
    return " ".join(f"{k}={v}" for k, v in q.items())


def _explain(console: Console, r: Reason) -> None:
    console.print(f"    [bold]{escape(r.claim or r.code)}[/] ({_label(r)}"
                  f"{', not enforced' if not r.enforced else ''}) {escape(r.message)}")
    if r.scope:
        console.print(f"      scope: {escape(r.scope)}")
    for s in r.sources:
        console.print(f"      source: {escape(s)}")
    for e in r.evidence:
        console.print(f"      evidence: {escape(e)}")


def render_answer(console: Console, a: Answer, *, explain: bool = False) -> None:
    console.print(f"[bold]verdict:[/] {_st(a.verdict)} — {escape(a.summary)}")
    console.print(f"[dim]query: {escape(_query_line(a))}[/]")
    if a.assumed:
        console.print(f"[dim]assumed: {escape(', '.join(f'{k}={v}' for k, v in a.assumed.items()))}[/]")
    structural = [k for k in a.kernels if k.status == "rejected" and k.reasons
                  and all(r.verification == "structural" for r in k.reasons)]
    shown = [k for k in a.kernels if k not in structural]
    console.print("[bold]kernels:[/]")
    for k in shown:
        _kernel_lines(console, k, bool(a.backends))
    if structural:
        names = ", ".join(k.id for k in structural)
        console.print(f"[dim]not applicable (phase, layout or engine): {escape(names)}[/]")
    if a.backends:
        _backends(console, a.backends)
    if a.ranking:
        _ranking(console, a.ranking, explain)
    if a.memory is not None:
        m = a.memory
        fits = {True: "[green]fits[/]", False: "[red]does not fit[/]", None: "[cyan]no ctx given[/]"}[m.fits]
        console.print(f"[bold]memory:[/] {fits}; KV {m.kv_bytes_per_token:,.0f} B/token; max ctx {m.max_ctx:,}")
        for part in m.formula.split("; "):
            console.print(f"  {escape(part)}")
        for n in m.notes:
            console.print(f"  [dim]{escape(n)}[/]")
    for n in a.notes:
        console.print(f"[dim]note: {escape(n)}[/]")
    _caveats(console, a)
    if a.depends_on:
        console.print(f"[bold]depends on:[/] {escape(', '.join(a.depends_on))} (give them to decide the unknowns)")
    refuted = {r.claim: r for k in a.kernels for r in k.refuted}
    for r in refuted.values():
        console.print(f"[dim]refuted, not enforced: {escape(r.claim)}: {escape(r.message)}[/]")
    if explain:
        console.print("[bold]explain:[/]")
        for k in a.kernels:
            rs = k.reasons + k.caveats + k.refuted
            if rs:
                console.print(f"  [bold]{k.id}[/] {_st(k.status)}")
                for r in rs:
                    _explain(console, r)
        for b in a.backends:
            if b.reasons or b.caveats:
                console.print(f"  [bold]{b.id}[/] {_st(b.status)}")
                for r in b.reasons + b.caveats:
                    _explain(console, r)
        for r in a.caveats:
            _explain(console, r)
        if a.claims_used:
            console.print(f"  [dim]claims used: {escape(', '.join(a.claims_used))}[/]")


def _ranking(console: Console, ranking: dict[str, Any], explain: bool) -> None:
    for phase, r in ranking.items():
        cfg = r["config"]
        shape = ", ".join(f"{k}={v}" for k, v in cfg.items() if k != "phase")
        near = f" (nearest measured: {', '.join(f'{k}={v}' for k, v in r['nearest'].items())})" if r["nearest"] else ""
        verdict = f"clear winner by {r['ratio']}x" if r["winner"] else "no clear winner"
        console.print(f"[bold]measured {phase}[/] on {escape(r['gpu'])}: {verdict}{escape(near)}")
        console.print(f"  [dim]{escape(shape)}[/]")
        for i, row in enumerate(r["ranking"], 1):
            n = len(row["samples"]) if isinstance(row["samples"], list) else row["samples"]
            console.print(f"  {i}. {escape(row['kernel']):30} {row['median_us']:>10,.1f} us  ({escape(row['backend'])},"
                          f" {n} sample{'s' if n != 1 else ''})")
        if explain:
            console.print(f"  [dim]rule: {escape(r['rule'])}[/]")
            for mid in r["measurements"]:
                console.print(f"  [dim]measurement: {escape(mid)}[/]")


def _backends(console: Console, backends: list[BackendAnswer]) -> None:
    console.print("[bold]engine backends:[/]")
    for b in sorted(backends, key=lambda b: (_ORDER[b.status], b.id)):
        ks = ", ".join(f"{k}:{s}" for k, s in b.kernels.items()) or "-"
        console.print(f"  [{STYLE[b.status]}]{b.status:<9}[/]{b.id:<24}[dim]{escape(b.backend_name)}; "
                      f"kernels {escape(ks)}[/]")
        rs = sorted(b.reasons, key=lambda r: bool(r.depends_on))
        for r in rs[:4]:
            console.print(f"{'':11}- {_short(r)}")
        if len(rs) > 4:
            console.print(f"{'':11}[dim]- +{len(rs) - 4} more (--explain)[/]")
        for r in b.caveats[:2]:
            console.print(f"{'':11}- caveat: {_short(r)}")


_ORDER = {"ok": 0, "caveat": 1, "unknown": 2, "rejected": 3}


def _caveats(console: Console, a: Answer) -> None:
    seen: dict[str, Reason] = {}
    for r in a.caveats:
        seen.setdefault(r.claim, r)
    for k in a.kernels:
        if k.status in ("ok", "caveat", "unknown"):
            for r in k.caveats:
                seen.setdefault(r.claim, r)
    if seen:
        console.print("[bold]caveats:[/]")
        for r in seen.values():
            who = f"{r.subject}: " if r.subject else ""
            console.print(f"  - {escape(who + r.message)} [dim]\\[{escape(r.claim)}, {_label(r)}][/]")
    ws = list(dict.fromkeys(w for k in a.kernels for w in k.workarounds))
    if ws and a.verdict != "yes":
        console.print("[bold]workarounds:[/]")
        for w in ws[:8]:
            console.print(f"  - {escape(w)}")


def render_multi(console: Console, m: MultiAnswer, *, explain: bool = False) -> None:
    console.print(f"[bold]{escape(m.summary)}[/]")
    console.print(f"[dim]query: {escape(_query_line(m))}[/]")
    console.print("[bold]one row per accelerator:[/]")
    for a in m.rows:
        gated = [k for k in a.kernels if k.gates]
        good = [k.id for k in gated if k.status == "ok"] + [f"{k.id}*" for k in gated if k.status == "caveat"]
        ungated = [k.id for k in a.kernels if not k.gates and k.status in ("ok", "caveat")]
        mem = ""
        if a.memory is not None:
            mem = {True: " fits", False: " no fit", None: ""}[a.memory.fits] + f" max ctx {a.memory.max_ctx:,};"
        kern = ", ".join(good) or "no gated kernel passes"
        extra = f" [dim](+{len(ungated)} with no gates recorded)[/]" if ungated else ""
        unk = sum(k.status == "unknown" for k in a.kernels)
        unk_txt = f" [dim]{unk} unknown[/]" if unk else ""
        console.print(f"  {a.query.get('gpu') or '?':<22}[{STYLE.get(a.verdict, 'white')}]{a.verdict:<12}[/]"
                      f"{escape(mem)} {escape(kern)}{extra}{unk_txt}")
    console.print("[dim]* = with caveats; query one --gpu for reasons[/]")
    if explain:
        for a in m.rows:
            console.rule(a.query.get("gpu") or "")
            render_answer(console, a, explain=True)
