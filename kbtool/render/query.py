"""Text rendering of a query answer: verdict, kernel table, engine backends, memory, caveats.

Every line is built as (text, style) segments from the answer (no markup, so nothing to escape) and written to
a sink (kbtool/render/sink.py): plain text, or ANSI styles on a terminal (never rich).
The answer objects are read by attribute only.
"""

from __future__ import annotations

from kbtool.render.sink import PlainSink, Sink

TYPE_CHECKING = False  # the warm query path imports this module: no typing at run time
if TYPE_CHECKING:
    from typing import Any

    from kbtool.render.sink import Seg
    from kbtool.solve.answer import Answer, BackendAnswer, KernelAnswer, MultiAnswer, Reason

__all__ = ["LABEL", "STYLE", "PlainSink", "Sink", "render_answer", "render_multi"]


def _sink(target: Sink) -> Sink:
    return target

STYLE = {"ok": "green", "caveat": "yellow", "unknown": "cyan", "rejected": "red",
         "yes": "bold green", "no": "bold red", "conditional": "bold yellow"}
LABEL = {"verified": "verified", "unverified": "unverified", "refuted": "REFUTED", "disputed": "disputed",
         "untestable": "untestable", "structural": "kb"}
_IND = " " * 11
_ORDER = {"ok": 0, "caveat": 1, "unknown": 2, "rejected": 3}


def _st(s: str) -> Seg:
    return (s, STYLE.get(s, "white"))


def _label(r: Reason) -> str:
    """The verification label; evidence-backed ones say where the evidence ran (it covers nothing else)."""
    on = f" on {', '.join(r.verified_on)}" if r.verified_on and r.verification in ("verified", "refuted") else ""
    return LABEL[r.verification] + on


def _short(r: Reason, width: int = 150) -> list[Seg]:
    tag = r.claim or r.code
    layer = "engine: " if r.layer == "engine" else ""
    phase = f"({r.phase}) " if r.phase else ""
    if r.depends_on and r.verification != "structural":
        body = f"{r.code}: depends on {', '.join(r.depends_on)}; passes when {r.allowed}"
    else:
        body = r.message
    text = f"{layer}{phase}{body}"
    if len(text) > width:
        text = text[: width - 1] + "…"
    return [(f"{text} ", ""), (f"[{tag}, {_label(r)}]", "dim")]


def _undecided(r: Reason) -> bool:
    return bool(r.depends_on)


def _kernel_lines(sink: Sink, k: KernelAnswer, via: bool) -> None:
    phases = ", ".join([p if s == k.status else f"{p}:{s}" for p, s in k.phase_status.items()])
    extra = f"  via {', '.join(k.via)}" if via and k.via else ""
    head: list[Seg] = [("  ", ""), (f"{k.status:<9}", STYLE[k.status]), (f"{k.id:<32}", ""), (phases + extra, "dim")]
    enforced = [r for r in k.reasons if r.enforced]
    if len(enforced) > 1:
        enforced.sort(key=_undecided)  # decided gates first (a stable sort keeps their order)
    if not enforced and not k.caveats:
        tail = ("  passes every gate", "") if k.gates else ("  no gates recorded in the KB", "dim")
        sink.line([*head, tail])
        return
    sink.line(head)
    for r in enforced[:3]:
        sink.line([(f"{_IND}- ", ""), *_short(r)])
    if len(enforced) > 3:
        sink.line([(_IND, ""), (f"- +{len(enforced) - 3} more (--explain)", "dim")])
    if k.status in ("ok", "caveat"):
        for r in k.caveats[:2]:
            sink.line([(f"{_IND}- caveat: ", ""), *_short(r)])


def _query_line(a: Answer | MultiAnswer) -> str:
    q = {k: v for k, v in a.query.items() if v not in (None, [], {}, "none") and k != "utilization"}
    return " ".join(f"{k}={v}" for k, v in q.items())


def _explain(sink: Sink, r: Reason) -> None:
    sink.line([("    ", ""), (r.claim or r.code, "bold"),
               (f" ({_label(r)}{', not enforced' if not r.enforced else ''}) {r.message}", "")])
    if r.scope:
        sink.line([(f"      scope: {r.scope}", "")])
    for s in r.sources:
        sink.line([(f"      source: {s}", "")])
    for e in r.evidence:
        sink.line([(f"      evidence: {e}", "")])


def render_answer(target: Sink, a: Answer, *, explain: bool = False) -> None:
    """Write one answer to a sink (or a rich Console)."""
    sink = _sink(target)
    sink.line([("verdict:", "bold"), (" ", ""), _st(a.verdict), (f" — {a.summary}", "")])
    sink.line([(f"query: {_query_line(a)}", "dim")])
    if a.assumed:
        sink.line([(f"assumed: {', '.join(f'{k}={v}' for k, v in a.assumed.items())}", "dim")])
    structural = [k for k in a.kernels if k.status == "rejected" and k.reasons
                  and all(r.verification == "structural" for r in k.reasons)]
    shown = [k for k in a.kernels if k not in structural]
    sink.line([("kernels:", "bold")])
    for k in shown:
        _kernel_lines(sink, k, bool(a.backends))
    if structural:
        names = ", ".join(k.id for k in structural)
        sink.line([(f"not applicable (phase, layout or engine): {names}", "dim")])
    if a.engine:
        _engine(sink, a.engine, explain)
    elif a.backends:
        _backends(sink, a.backends)
    if a.ranking:
        _ranking(sink, a.ranking, explain)
    if a.memory is not None:
        _memory(sink, a.memory, a.query.get("ctx"))
    for n in a.notes:
        sink.line([(f"note: {n}", "dim")])
    _caveats(sink, a)
    if a.depends_on:
        sink.line([("depends on:", "bold"),
                   (f" {', '.join(a.depends_on)} (give them to decide the unknowns)", "")])
    refuted = {r.claim: r for k in a.kernels for r in k.refuted}
    for r in refuted.values():
        sink.line([(f"refuted, not enforced: {r.claim}: {r.message}", "dim")])
    if explain:
        _explain_all(sink, a)


def _memory(sink: Sink, m: Any, ctx: int | None) -> None:
    """The memory lines: verdict, KV per token, sequences at the asked ctx, max ctx and what binds it."""
    fits = {True: ("fits", "green"), False: ("does not fit", "red"), None: ("no ctx given", "cyan")}[m.fits]
    seqs = ""
    if m.max_sequences is not None and ctx:
        seqs = f"; {m.max_sequences:,} sequence{'s' if m.max_sequences != 1 else ''} of {ctx:,} fit at once"
    bind = {"model": "the model's max_position_embeddings binds",
            "memory": "memory binds"}.get(m.ctx_limit, m.ctx_limit)
    sink.line([("memory:", "bold"), (" ", ""), fits,
               (f"; KV {m.kv_bytes_per_token:,.0f} B/token{seqs}; max ctx {m.max_ctx:,} ({bind})", "")])
    for part in m.formula.split("; "):
        sink.line([(f"  {part}", "")])
    for n in m.notes:
        sink.line([("  ", ""), (n, "dim")])


def _explain_all(sink: Sink, a: Answer) -> None:
    sink.line([("explain:", "bold")])
    for k in a.kernels:
        rs = k.reasons + k.caveats + k.refuted
        if rs:
            sink.line([("  ", ""), (k.id, "bold"), (" ", ""), _st(k.status)])
            for r in rs:
                _explain(sink, r)
    for b in a.backends:
        if b.reasons or b.caveats:
            sink.line([("  ", ""), (b.id, "bold"), (" ", ""), _st(b.status)])
            for r in b.reasons + b.caveats:
                _explain(sink, r)
    for r in a.caveats:
        _explain(sink, r)
    if a.claims_used:
        sink.line([("  ", ""), (f"claims used: {', '.join(a.claims_used)}", "dim")])


def _ranking(sink: Sink, ranking: dict[str, Any], explain: bool) -> None:
    for phase, r in ranking.items():
        cfg = r["config"]
        shape = ", ".join(f"{k}={v}" for k, v in cfg.items() if k != "phase")
        near = f" (nearest measured: {', '.join(f'{k}={v}' for k, v in r['nearest'].items())})" if r["nearest"] else ""
        verdict = f"clear winner by {r['ratio']}x" if r["winner"] else "no clear winner"
        sink.line([(f"measured {phase}", "bold"), (f" on {r['gpu']}: {verdict}{near}", "")])
        sink.line([("  ", ""), (shape, "dim")])
        for i, row in enumerate(r["ranking"], 1):
            n = len(row["samples"]) if isinstance(row["samples"], list) else row["samples"]
            sink.line([(f"  {i}. {row['kernel']:30} {row['median_us']:>10,.1f} us  ({row['backend']},"
                        f" {n} sample{'s' if n != 1 else ''})", "")])
        if explain:
            sink.line([("  ", ""), (f"rule: {r['rule']}", "dim")])
            for mid in r["measurements"]:
                sink.line([("  ", ""), (f"measurement: {mid}", "dim")])


def _backends(sink: Sink, backends: list[BackendAnswer]) -> None:
    sink.line([("engine backends:", "bold")])
    for b in sorted(backends, key=lambda b: (_ORDER[b.status], b.id)):
        ks = ", ".join(f"{k}:{s}" for k, s in b.kernels.items()) or "-"
        sink.line([("  ", ""), (f"{b.status:<9}", STYLE[b.status]), (f"{b.id:<24}", ""),
                   (f"{b.backend_name}; kernels {ks}", "dim")])
        rs = sorted(b.reasons, key=lambda r: bool(r.depends_on))
        for r in rs[:4]:
            sink.line([(f"{_IND}- ", ""), *_short(r)])
        if len(rs) > 4:
            sink.line([(_IND, ""), (f"- +{len(rs) - 4} more (--explain)", "dim")])
        for r in b.caveats[:2]:
            sink.line([(f"{_IND}- caveat: ", ""), *_short(r)])


def _caveats(sink: Sink, a: Answer) -> None:
    seen: dict[str, Reason] = {}
    for r in a.caveats:
        seen.setdefault(r.claim, r)
    for k in a.kernels:
        if k.status in ("ok", "caveat", "unknown"):
            for r in k.caveats:
                seen.setdefault(r.claim, r)
    if seen:
        sink.line([("caveats:", "bold")])
        for r in seen.values():
            who = f"{r.subject}: " if r.subject else ""
            sink.line([(f"  - {who}{r.message} ", ""), (f"[{r.claim}, {_label(r)}]", "dim")])
    ws = list(dict.fromkeys(w for k in a.kernels for w in k.workarounds))
    if ws and a.verdict != "yes":
        sink.line([("workarounds:", "bold")])
        for w in ws[:8]:
            sink.line([(f"  - {w}", "")])


def render_multi(target: Sink, m: MultiAnswer, *, explain: bool = False) -> None:
    """Write the one-row-per-accelerator answer (and with `explain`, each row's full answer under a rule)."""
    sink = _sink(target)
    sink.line([(m.summary, "bold")])
    sink.line([(f"query: {_query_line(m)}", "dim")])
    sink.line([("one row per accelerator:", "bold")])
    for a in m.rows:
        gated = [k for k in a.kernels if k.gates]
        good = [k.id for k in gated if k.status == "ok"] + [f"{k.id}*" for k in gated if k.status == "caveat"]
        ungated = [k.id for k in a.kernels if not k.gates and k.status in ("ok", "caveat")]
        mem = ""
        if a.memory is not None:
            mem = {True: " fits", False: " no fit", None: ""}[a.memory.fits] + f" max ctx {a.memory.max_ctx:,};"
        kern = ", ".join(good) or "no gated kernel passes"
        segs: list[Seg] = [(f"  {a.query.get('gpu') or '?':<22}", ""),
                           (f"{a.verdict:<12}", STYLE.get(a.verdict, "white")), (f"{mem} {kern}", "")]
        if ungated:
            segs += [(" ", ""), (f"(+{len(ungated)} with no gates recorded)", "dim")]
        unk = sum(k.status == "unknown" for k in a.kernels)
        if unk:
            segs += [(" ", ""), (f"{unk} unknown", "dim")]
        sink.line(segs)
    sink.line([("* = with caveats; query one --gpu for reasons", "dim")])
    if explain:
        for a in m.rows:
            sink.rule(a.query.get("gpu") or "")
            render_answer(sink, a, explain=True)


def _engine(sink: Sink, e: dict[str, Any], explain: bool) -> None:
    """vLLM's selection (kbtool/solve/engine.py): the priority list with each backend's refusal reasons."""
    sink.line([(f"vLLM {e['vllm']}:", "bold"), (" ", ""),
               (f"selects {_name(e, e['selected'])}" if e.get("selected") else f"error: {e['error']}", "")])
    for b in e["backends"]:
        mark = "selected" if b["id"] == e.get("selected") else b["status"]
        style = "green" if mark == "selected" else STYLE.get(b["status"], "")
        reasons = "; ".join(b["reasons"][:2 if not explain else None])
        more = f" (+{len(b['reasons']) - 2})" if not explain and len(b["reasons"]) > 2 else ""
        sink.line([("  ", ""), (f"{mark:<9}", style), (f"{b['name']:<28}", ""), (reasons + more, "dim")])
    mla = e.get("mla")
    if mla:
        sink.line([("  MLA: ", "bold"), (f"decode {mla['decode']}; prefill {' > '.join(mla['prefill'])} "
                                         f"({mla['prefill_shape']}); KV {mla['kv_layout']}", "")])
        if mla.get("indexer"):
            sink.line([("  ", ""), (mla["indexer"], "dim")])
    pre = e.get("preflight")
    if pre:
        sink.line([("  pre-flight: ", "bold"), (pre, "")])


def _name(e: dict[str, Any], bid: str) -> str:
    return next((b["name"] for b in e["backends"] if b["id"] == bid), bid)
