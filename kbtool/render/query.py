"""Text rendering of a query answer: verdict, kernel table, engine backends, memory, caveats.

Every line is built as (text, style) segments from the answer (no markup, so nothing to escape) and written to
a sink (kbtool/render/sink.py): plain text, or ANSI styles on a terminal (never rich).
The answer objects are read by attribute only.
"""

from __future__ import annotations

from kbtool.render.sink import PlainSink, Sink
from kbtool.render.wrap import wrap

TYPE_CHECKING = False  # the warm query path imports this module: no typing at run time
if TYPE_CHECKING:
    from typing import Any

    from kbtool.render.sink import Seg
    from kbtool.solve.answer import Answer, MultiAnswer
    from kbtool.solve.parts import BackendAnswer, KernelAnswer, Reason

__all__ = ["LABEL", "STYLE", "PlainSink", "Sink", "render_answer", "render_multi"]


def _sink(target: Sink) -> Sink:
    return target

STYLE = {"ok": "green", "caveat": "yellow", "disputed": "magenta", "unknown": "cyan", "rejected": "red",
         "yes": "bold green", "no": "bold red", "conditional": "bold yellow"}
LABEL = {"verified": "verified", "unverified": "unverified", "refuted": "REFUTED", "disputed": "disputed",
         "untestable": "untestable", "structural": "kb"}
_IND = " " * 11
# caveats that change results first, then how to call the kernel, then speed and output details
_CAVEAT_RANK = {"FP8_ACCUMULATION": 0, "ACCURACY": 0, "MEMORY": 1, "WORKSPACE": 1, "Q_DTYPE": 2, "KV_FORMAT": 2,
                "PERF": 4, "DTYPE": 4}
_ORDER = {"ok": 0, "caveat": 1, "disputed": 2, "unknown": 3, "rejected": 4}


def _st(s: str) -> Seg:
    return (s, STYLE.get(s, "white"))


def _label(r: Reason) -> str:
    """The verification label for this query's environment, with where the claim's verdicts hold."""
    return r.verdict or LABEL[r.verification]


def _width() -> int:
    import os

    from kbtool.render.sink import rule_width

    return max(40, min(rule_width(os.environ), 120))


def _wrap(text: str, width: int, first: str = "", rest: str = "    ") -> list[str]:
    """Wrapped at spaces, never cut mid-word (a long token overflows rather than breaks)."""
    return wrap(text, width, first, rest) or [first.rstrip()]


def _short(r: Reason) -> list[Seg]:
    tag = r.claim or r.code
    layer = "engine: " if r.layer == "engine" else ""
    phase = f"({r.phase}) " if r.phase else ""
    if r.depends_on and r.verification != "structural":
        body = f"{r.code}: depends on {', '.join(r.depends_on)}; passes when {r.allowed}"
    else:
        body = r.message
    return [(f"{layer}{phase}{body} ", ""), (f"[{tag}, {_label(r)}]", "dim")]


def _text(segs: list[Seg]) -> str:
    return "".join(t for t, _ in segs)


def _lines(sink: Sink, text: str, width: int, first: str = "", rest: str = "    ", style: str = "") -> int:
    got = _wrap(text, width, first, rest)
    for ln in got:
        sink.line([(ln, style)])
    return len(got)


def _styled(line: str, styles: dict[str, str]) -> list[Seg]:
    """`line` as segments, each kernel id in `styles` in its status colour."""
    segs: list[Seg] = []
    rest = line
    while rest:
        hits = [(rest.find(k), k) for k in styles if rest.find(k) >= 0]
        if not hits:
            segs.append((rest, ""))
            break
        at, k = min(hits, key=lambda h: (h[0], -len(h[1])))
        if at:
            segs.append((rest[:at], ""))
        segs.append((k, styles[k]))
        rest = rest[at + len(k):]
    return segs


def _undecided(r: Reason) -> bool:
    return bool(r.depends_on)


def _kernel_lines(sink: Sink, k: KernelAnswer, via: bool, width: int = 120) -> None:
    """Every reason of one kernel (the --explain listing: nothing left out)."""
    phases = ", ".join([p if s == k.status else f"{p}:{s}" for p, s in k.phase_status.items()])
    extra = f"  via {', '.join(k.via)}" if via and k.via else ""
    enforced = [r for r in k.reasons if r.enforced]
    if len(enforced) > 1:
        enforced.sort(key=_undecided)  # decided gates first (a stable sort keeps their order)
    tail = ""
    if not enforced and not k.caveats:
        tail = "  passes every gate" if k.gates else "  no gates recorded in the KB"
    _lines(sink, f"{k.status:<9}{k.id}  {phases}{extra}{tail}", width, "  ", " " * 11)
    for r in enforced:
        _lines(sink, _text(_short(r)), width, f"{_IND}- ", _IND + "  ")
    for r in k.caveats:
        note = f" ({r.handled})" if r.handled else ""
        _lines(sink, "caveat: " + _text(_short(r)) + note, width, f"{_IND}- ", _IND + "  ")
    for w in k.workarounds:
        _lines(sink, f"workaround: {w}", width, f"{_IND}  ", _IND + "    ")


def _query_line(a: Answer | MultiAnswer) -> str:
    q = {k: v for k, v in a.query.items() if v not in (None, [], {}, "none") and k != "utilization"}
    return " ".join(f"{k}={v}" for k, v in q.items())


def _explain(sink: Sink, r: Reason) -> None:
    w = _width()
    _lines(sink, f"{r.claim or r.code} ({_label(r)}{', not enforced' if not r.enforced else ''}) {r.message}",
           w, "    ", "      ")
    if r.scope:
        _lines(sink, f"scope: {r.scope}", w, "      ", "        ")
    for side in r.sides:
        _lines(sink, f"side: {side['position']} ({'; '.join(side['sources'])})", w, "      ", "        ")
    for s in r.sources:
        _lines(sink, f"source: {s}", w, "      ", "        ")
    for e in r.evidence:
        _lines(sink, f"evidence: {e}", w, "      ", "        ")
    if r.handled:
        _lines(sink, r.handled, w, "      ", "        ")


def _assumed_text(assumed: dict[str, Any], libraries: set[str]) -> str:
    """The assumed inputs in a few words: the libraries of the kernels shown (all of them are in the JSON)."""
    newest = {k: str(v).split(" ")[0] for k, v in assumed.items() if str(v).endswith("(newest recorded)")}
    libs = [f"{k} {v}" for k, v in newest.items() if k in libraries]
    blocks = [k for k in assumed if k.startswith("block_size (")]
    parts = [f"{k} {v}" for k, v in assumed.items() if k not in blocks and k not in newest]
    if libs:
        parts.append("newest recorded " + ", ".join(libs))
    if blocks:
        parts.append("paged block size as each kernel needs")
    return "assumed: " + "; ".join(parts)


def render_answer(target: Sink, a: Answer, *, explain: bool = False) -> None:
    """Write one answer: the headline (at most 25 lines at 80 columns), and with `explain` everything."""
    sink = _sink(target)
    width = _width()
    head = _wrap(f"verdict: {a.verdict} — {a.summary}", width)
    sink.line([("verdict:", "bold"), (" ", ""), _st(a.verdict), (head[0][len("verdict: ") + len(a.verdict):], "")])
    for ln in head[1:]:
        sink.line([(ln, "")])
    used = len(head)
    by_id = {k.id: k for k in a.kernels}
    shown: list[str] = []
    for ids in a.recommended.values():
        shown += [i for i in ids[:3] if i not in shown]
    if a.assumed:
        libs = {lib for i in shown for lib in [by_id[i].library] if lib} | {"cuda"}
        used += _lines(sink, _assumed_text(a.assumed, libs), width, style="dim")
    for phase, ids in a.recommended.items():
        chosen = _engine_choice(a.engine, phase)
        top = ids[:3]
        marks = ", ".join(f"{i}{'' if by_id[i].phase_status.get(phase) == 'ok' else ' (caveat)'}" for i in top)
        more = f" (+{len(ids) - 3} passing)" if len(ids) > 3 else ""
        styles = {i: STYLE[by_id[i].phase_status.get(phase, "ok")] for i in top}
        if chosen:  # the engine decides what runs; the kernel layer's own list follows it
            label = (a.engine or {}).get("label")
            rest = f"; kernels passing on their own: {marks}{more}" if ids else \
                "; no kernel record passes on its own: --explain"
            text = f"use for {phase}: {chosen} ({label}'s choice){rest}"
        elif not ids and (a.engine or {}).get("state") == "not_recorded":  # its backends are not resolved
            label = (a.engine or {}).get("label")
            text = f"use for {phase}: no kernel is known to pass ({label} is not recorded: below)"
        elif not ids:
            text = f"use for {phase}: no kernel is known to pass"
        else:
            text = f"use for {phase}: {marks}{more}"
        for ln in _wrap(text, width):
            sink.line(_styled(ln, styles))
            used += 1
    if a.engine:  # the engine's own choice (its Pick)
        used += _lines(sink, engine_headline(a.engine), width)
    if a.memory is not None:
        m = a.memory
        fits = {True: "fits", False: "does not fit", None: "no ctx given"}[m.fits]
        gb = 1e9  # as the memory formula writes them
        if m.available_bytes < 0 and m.weights_bytes > m.available_bytes + m.weights_bytes + m.reserve_bytes:
            room = f"weights {m.weights_bytes / gb:,.1f} GB exceed the usable memory"
        elif m.available_bytes < 0:  # the weights fit; the reserve takes the rest
            room = (f"weights {m.weights_bytes / gb:,.1f} GB and a {m.reserve_bytes / gb:,.1f} GB reserve exceed the "
                    "usable memory")
        else:
            room = f"{m.available_bytes / gb:,.1f} GB free after weights and reserve; max ctx {m.max_ctx:,}"
        ctx = a.query.get("ctx")
        seqs = ""
        if getattr(m, "max_sequences", None) is not None and ctx and m.available_bytes >= 0:
            seqs = (f"; {m.max_sequences:,} sequence{'s' if m.max_sequences != 1 else ''} of {ctx:,} "
                    f"fit{'s' if m.max_sequences == 1 else ''} at once")
        bind = {"model": "max_position_embeddings binds", "memory": "memory binds"}.get(
            getattr(m, "ctx_limit", None) or "", "")
        used += _lines(sink, f"memory: {fits}; KV {m.kv_bytes / gb:,.1f} GB ({m.kv_bytes_per_token:,.0f} B/token);"
                       f" {room}{f' ({bind})' if bind and m.available_bytes >= 0 else ''}{seqs}", width)
        if m.fits is False:
            used += _lines(sink, "  to fit: " + _fit_options(a, m), width)
        report = m.engine_report
        if report and report.get("warning"):  # no engine named: the engine's own defaults would stop it
            used += _lines(sink, "  but " + report["warning"], width, "", "    ")
        if a.engine and report and report.get("text"):  # what the engine prints at start-up (its log lines)
            used += _lines(sink, "  " + report["text"], width, "", "    ")
    ignored = a.query.get("ignored")
    if ignored:
        used += _lines(sink, f"serve-line flags not considered: {', '.join(ignored)}", width, "", "    ", style="dim")
    cav: dict[str, tuple[str, Reason]] = {}
    for r in a.caveats:
        cav.setdefault(r.claim, (r.subject or "", r))
    per = [sorted(by_id[kid].caveats, key=lambda r: _CAVEAT_RANK.get(r.code, 5)) for kid in shown]
    for i in range(max((len(p) for p in per), default=0)):  # round robin: each kernel's first caveat first
        for kid, rs in zip(shown, per, strict=True):
            if i < len(rs):
                cav.setdefault(rs[i].claim, (kid, rs[i]))
    budget = 25 - used - 3  # the counting line (two at most) and the caveats heading
    left = 0
    if cav:
        block: list[str] = []
        extra: dict[int, list[str]] = {}
        for who, r in cav.values():
            note = f" ({r.handled})" if r.handled else ""
            tag = f" [{r.claim}, {_label(r)}]" if r.claim else ""  # a structural caveat has no claim to cite
            one = _wrap(f"{who}: {r.message}{tag}{note}", width, "  ", "    ")
            if len(block) + len(one) > budget and block:  # the first caveat is always shown
                left += 1
                continue
            block += one
            if r.workaround and not r.handled:
                extra[len(block)] = _wrap(f"workaround: {r.workaround}", width, "    ", "      ")
        spare, keep = budget - len(block), []
        for at in sorted(extra):  # workarounds under their caveat, the first caveats' first, while they fit
            if len(extra[at]) <= spare:
                spare -= len(extra[at])
                keep.append(at)
        for at in reversed(keep):
            block[at:at] = extra[at]
        if block:
            sink.line([("caveats:", "bold")])
            for ln in block:
                sink.line([(ln, "")])
    counts = {s: sum(k.status == s for k in a.kernels if k.id not in shown)
              for s in ("ok", "caveat", "disputed", "unknown", "rejected")}
    rest = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    if left:
        rest += f"{', ' if rest else ''}{left} more caveat{'s' if left != 1 else ''}"
    if a.depends_on:
        rest += f"{'; ' if rest else ''}depends on {', '.join(a.depends_on)}"
    if rest:
        _lines(sink, f"{rest}: --explain", width, style="dim")
    if explain:
        _explain_all(sink, a)


def _memory(sink: Sink, m: Any, ctx: int | None) -> None:
    """The memory lines: verdict, KV per token, sequences at the asked ctx, max ctx and what binds it."""
    fits = {True: ("fits", "green"), False: ("does not fit", "red"), None: ("no ctx given", "cyan")}[m.fits]
    seqs = ""
    if m.max_sequences is not None and ctx:
        seqs = (f"; {m.max_sequences:,} sequence{'s' if m.max_sequences != 1 else ''} of {ctx:,} "
                    f"fit{'s' if m.max_sequences == 1 else ''} at once")
    bind = {"model": "the model's max_position_embeddings binds",
            "memory": "memory binds"}.get(m.ctx_limit, m.ctx_limit)
    w = _width()
    _lines(sink, f"memory: {fits[0]}; KV {m.kv_bytes_per_token:,.0f} B/token{seqs}; max ctx {m.max_ctx:,} ({bind})",
           w, "", "    ")
    for part in m.formula.split("; "):
        _lines(sink, part, w, "  ", "    ")
    report = m.engine_report
    if report and report.get("text"):
        _lines(sink, report["text"], w, "  ", "    ")
    for n in m.notes:
        _lines(sink, n, w, "  ", "    ", style="dim")


def render_comparison(sink: Sink, c: Any, explain: bool = False) -> None:
    """--engine vllm,sglang: each engine's answer under its label, then where they differ."""
    for a, d in zip(c.answers, c.digest, strict=True):
        sink.rule(str(d.get("label") or d.get("engine")))
        render_answer(sink, a, explain=explain)
    sink.rule("where they differ")
    w = _width()
    if not c.differences:
        sink.line([("the engines agree on backend, page size, pool and verdict", "")])
    for text in c.differences:
        _lines(sink, text, w, "", "    ")


def _explain_all(sink: Sink, a: Answer) -> None:
    sink.line([("explain:", "bold")])
    sink.line([(f"query: {_query_line(a)}", "dim")])
    if a.assumed:
        _lines(sink, "assumed: " + ", ".join(f"{k}={v}" for k, v in a.assumed.items()), _width(), style="dim")
    sink.line([("kernels:", "bold")])
    for k in a.kernels:
        _kernel_lines(sink, k, bool(a.backends), _width())
    if a.engine:
        _engine(sink, a.engine, True)
    elif a.backends:
        _backends(sink, a.backends)
    _calls(sink, a.backends)
    if a.ranking:
        _ranking(sink, a.ranking, True)
    if a.memory is not None:
        _memory(sink, a.memory, a.query.get("ctx"))
    for n in a.notes:
        _lines(sink, f"note: {n}", _width(), style="dim")
    sink.line([("reasons and sources:", "bold")])
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


def _calls(sink: Sink, backends: list[BackendAnswer]) -> None:
    """Each kernel as its backend calls it (kbtool/solve/calls.py): the build, the shape, the status from the claims
    about that build, the call and the engine file it is read from."""
    rows = [(b, c) for b in backends for c in b.calls]
    if not rows:
        return
    sink.line([("kernel calls (the build each backend calls, judged on the call it makes):", "bold")])
    w = _width()
    for b, c in rows:
        build = f"{c['build']} {c['version'] or ''}".strip() + (f" (fork of {c['fork_of']})" if c["fork_of"] else "")
        shape = ", ".join(f"{k}={v}" for k, v in c["shape"].items())
        _lines(sink, f"{c['status']:<9}{b.id} {c['phase']}: {c['kernel']} as {build}" + (f", {shape}" if shape else ""),
               w, "  ", " " * 11)
        _lines(sink, f"call: {c['call']}", w, f"{_IND}", _IND + "  ", style="dim")
        _lines(sink, f"source: {c['source']}", w, f"{_IND}", _IND + "  ", style="dim")
        if c["other_builds"]:
            _lines(sink, f"claims about other builds, not applied: {', '.join(c['other_builds'])}", w, f"{_IND}",
                   _IND + "  ", style="dim")


def _backends(sink: Sink, backends: list[BackendAnswer]) -> None:
    sink.line([("engine backends:", "bold")])
    w = _width()
    for b in sorted(backends, key=lambda b: (_ORDER[b.status], b.id)):
        ks = ", ".join(f"{k}:{s}" for k, s in b.kernels.items()) or "-"
        starts = getattr(b, "engine_status", b.status)
        note = "; the engine's own checks pass (it starts), kb's kernel layer refuses" if b.status == "rejected" and \
            starts in ("ok", "caveat") else ""
        _lines(sink, f"{b.status:<9}{b.id} {b.backend_name}; kernels {ks}{note}", w, "  ", " " * 11)
        for r in sorted(b.reasons, key=lambda r: bool(r.depends_on)):
            _lines(sink, _text(_short(r)), w, f"{_IND}- ", _IND + "  ")
        for r in b.caveats:
            _lines(sink, "caveat: " + _text(_short(r)), w, f"{_IND}- ", _IND + "  ")


def render_multi(target: Sink, m: MultiAnswer, *, explain: bool = False) -> None:
    """Write the one-row-per-accelerator answer (and with `explain`, each row's full answer under a rule)."""
    sink = _sink(target)
    sink.line([(m.summary, "bold")])
    sink.line([(f"query: {_query_line(m)}", "dim")])
    sink.line([("one row per accelerator:", "bold")])
    width = _width()
    gw = max([22] + [len(str(a.query.get("gpu") or "")) + 1 for a in m.rows])  # an id never runs into its verdict
    for a in m.rows:
        by_id = {k.id: k for k in a.kernels}
        use: list[str] = []
        for ids in a.recommended.values():
            use += [i for i in ids if i not in use]
        good = [f"{i}{'*' if by_id[i].status == 'caveat' else ''}" for i in use]
        mem = ""
        if a.memory is not None:
            mem = {True: "fits", False: "no fit", None: ""}[a.memory.fits] + f" max ctx {a.memory.max_ctx:,}; "
            short = (a.decision.detail or {}).get("short") if a.decision is not None else None
            if short:  # the engine starts with a pool shorter than the context: it caps requests (decision.py)
                mem = f"starts, requests capped at {short['max_request']:,}; "
            ctx = a.query.get("ctx")
            if getattr(a.memory, "ctx_limit", None) == "model" and ctx and ctx > a.memory.max_ctx:
                mem = f"ctx past the model's max {a.memory.max_ctx:,}; "
        kern = ", ".join(good) or "no kernel passes"
        if a.engine and a.engine.get("state") == "not_recorded":  # the releases around it: one --gpu names them
            kern = f"{a.engine['label']} not recorded; {kern}"
        unk = sum(k.status in ("unknown", "disputed") for k in a.kernels)
        tail = f" ({unk} unknown or disputed)" if unk else ""
        gpu = str(a.query.get("gpu") or "")
        _lines(sink, f"{gpu:<{gw}}{a.verdict:<12}{mem}{kern}{tail}", width, "  ", " " * (gw + 14))
    sink.line([("* = with caveats; query one --gpu for reasons", "dim")])
    if explain:
        for a in m.rows:
            sink.rule(a.query.get("gpu") or "")
            render_answer(sink, a, explain=True)


def _engine(sink: Sink, e: dict[str, Any], explain: bool) -> None:
    """The engine's selection: its headline, the backends it weighed with their refusal reasons (vLLM's priority
    list), the engine's own detail lines and what it would print at start-up."""
    sink.line([(f"{e['label']}:", "bold"), (" ", ""), (engine_headline(e)[len(e["label"]) + 1:], "")])
    for b in e.get("backends") or []:
        mark = "selected" if b["id"] == e.get("selected") else b["status"]
        style = "green" if mark == "selected" else STYLE.get(b["status"], "")
        reasons = "; ".join(b["reasons"][:2 if not explain else None])
        more = f" (+{len(b['reasons']) - 2})" if not explain and len(b["reasons"]) > 2 else ""
        sink.line([("  ", ""), (f"{mark:<9}", style), (f"{b['name']:<28}", ""), (reasons + more, "dim")])
    for head, text in e.get("details") or []:
        sink.line([(f"  {head}" if head else "  ", "bold"), (text, "" if head else "dim")])
    pre = e.get("preflight")
    if pre:
        sink.line([("  pre-flight: ", "bold"), (pre, "")])


def _fit_options(a: Answer, m: Any) -> str:
    """The changes that make it fit, as the solver sized them again (Memory.to_fit, solve/memory.py)."""
    ctx = a.query.get("ctx")
    if getattr(m, "ctx_limit", None) == "model" and ctx and ctx > m.max_ctx:  # only a shorter ctx helps
        return f"--ctx {m.max_ctx:,} or less (the model's max_position_embeddings; memory would then fit)"
    opts = []
    for o in getattr(m, "to_fit", None) or []:
        n = o.get("max_sequences")
        at = ctx if not o["change"].startswith(("--ctx", "--context-length")) else None  # a shorter ctx: one of it
        table = o.get("req_to_token_bytes")  # SGLang's request-to-token table: the change makes it fit
        opts.append(o["change"] + (f" ({n:,} sequence{'s' if n != 1 else ''} of {at:,})" if n and at else "")
                    + (f" (starts: request-to-token table {table / 1e9:,.1f} GB)" if table else ""))
    if not opts:
        return "nothing kb can change fits (shorter ctx, fp8 KV or weights, up to 64 GPUs)"
    return "; ".join(opts)


def _engine_choice(e: dict[str, Any] | None, phase: str) -> str | None:
    """The backend (or MLA prefill path) the engine runs `phase` with, or None where it does not start."""
    if not e or e.get("state") != "selected":
        return None
    got = e.get("prefill") if phase == "prefill" else e.get("decode")
    return str(got) if got is not None else None


def engine_headline(e: dict[str, Any]) -> str:
    """The engine's pick in one line: what it selects per phase, its page size and KV dtype, the refusals ahead of
    its choice, where the selection comes from; or its error; or the releases around an unrecorded one."""
    label, state = e["label"], e.get("state")
    if state == "not_recorded":  # the releases around it, and the sweep that records it
        return f"{label}: {e['between']}" + (f"; {e['source']}" if e.get("source") else "")
    if state == "depends":
        return f"{label}: {e['error']}"
    if state == "error":
        return f"{label} refuses: {e['error_type']}: {e['error']}"
    text = f"{label} selects {e['decode']}"
    if e.get("prefill") and e["prefill"] != e["decode"]:
        text += f" (decode); prefill {e['prefill']}" + (f", {e['prefill_note']}" if e.get("prefill_note") else "")
    elif e.get("prefill_note"):
        text += f" (decode); {e['prefill_note']}"
    if e.get("page_size") is not None:
        text += f"; page size {e['page_size']}" + (f" ({e['page_size_by']})" if e.get("page_size_by") else "")
    if e.get("kv_cache_dtype"):
        text += f"; --kv-cache-dtype {e['kv_cache_dtype']}"
    if e.get("refused"):
        text += "; refused: " + ", ".join(f"{name} ({why})" for name, why in e["refused"])
    if e.get("source"):
        text += f" [{e['source']}]"
    return text
