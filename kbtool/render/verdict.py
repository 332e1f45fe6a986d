"""The words of a verdict: the one place a query's summary is written, from its Decision (kbtool/solve/decision.py),
for the text answer and `--json` alike; the rows' summary without --gpu, and where engines differ under
--engine A,B. Nothing edits a sentence once it is made here (tests/render/test_verdict.py forbids `.replace` on it).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.answer import Answer, EngineComparison, MultiAnswer
    from kbtool.solve.decision import Decision

GB = 1e9  # as the memory formula writes them


def _gb(x: float) -> str:
    return f"{x / GB:,.1f}"


def _failure(det: dict[str, Any], more: bool = False) -> str:
    """The `fails` claim's words: its message, the claim and its verification, and its workaround (without its
    closing full stop where `more` words follow)."""
    f = det["fails"]
    fix = f.get("workaround") or ""
    fix = f"; fix: {fix.rstrip('.') if more else fix}" if fix else ""
    return f"{f['message']} [{f['claim']}, {f.get('verdict') or 'verified here'}]{fix}"


def _fits(d: Decision) -> str:
    """'; KV x GB fits in y GB' where the memory fits; '' where it is not sized."""
    m = d.memory
    if m is None or not m["fits"]:
        return ""
    return f"; KV {_gb(m['kv_bytes'])} GB fits in {_gb(m['available_bytes'])} GB"


def _no_fit(d: Decision) -> str:
    m = d.memory or {}
    if m["available_bytes"] <= 0:
        usable = f"{_gb(m['usable_bytes'])} GB usable ({m['utilization']:g} x {_gb(m['capacity_bytes'])} GB)"
        if m["weights_bytes"] > m["usable_bytes"]:
            return (f"does not fit: weights {_gb(m['weights_bytes'])} GB per GPU exceed the {usable}, before "
                    f"{_gb(m['kv_bytes'])} GB of KV")
        # the weights fit: the reserve (the engine's activation peak and CUDA graphs) takes the rest
        reserve = m["usable_bytes"] - m["weights_bytes"] - m["available_bytes"]
        return (f"does not fit: weights {_gb(m['weights_bytes'])} GB and a {_gb(reserve)} GB activation and "
                f"CUDA-graph reserve per GPU leave nothing of the {usable} for {_gb(m['kv_bytes'])} GB of KV")
    return (f"does not fit: KV needs {_gb(m['kv_bytes'])} GB, {_gb(m['available_bytes'])} GB left after weights and "
            f"the activation reserve (max ctx {m['max_ctx']:,})")


def _short(d: Decision) -> str:
    """'; it starts, but its pool holds N tokens, fewer than ...' where the engine starts with a pool shorter than
    the context (Decision.detail["short"])."""
    sh = d.detail.get("short")
    if not sh:
        return ""
    m = d.memory or {}
    return (f"; {m.get('engine')} starts, but its pool holds {sh['pool_tokens']:,} tokens, fewer than the "
            f"{sh['context_len']:,}-token context: a request is capped at {sh['max_request']:,} tokens (input "
            f"{sh['max_input']:,}), longer ones {sh['longer']} ({sh['source']})")


def _edge(d: Decision) -> str:
    """Why a start-up check is too close to call: kb's count, the boundary, and kb's error that spans it."""
    m, e = d.memory or {}, d.detail["edge"]
    b = e["band"]
    said = "would stop at start-up" if m.get("starts") is False else "starts"
    what = (f"{e['count']:,} KV blocks against {e['boundary']:,} for one request of the max length"
            if e["check"] == "max_model_len" else
            f"{e['count']:,} cache blocks for max_num_seqs {e['boundary']:,}, one per decode sequence")
    if b.get("boots"):
        err = (f"kb was {b['lowest']:+.1%} to {b['highest']:+.1%} off on {b['boots']} boots of {b['class']} models "
               f"on {m.get('engine')}")
    else:
        err = (f"no boot of {m.get('engine')} measures kb's error here, and the count is within {b['highest']:.0%} of "
               "the boundary")
    return f"by kb's count {m.get('engine')} {said}, with {what}; but {err}"


def _engine_yes(d: Decision) -> str:
    p = d.pick
    assert p is not None
    lead = "yes with" if not d.caveats else "yes, with hardware caveats, with" if d.caveats == ["hardware"] else \
        "yes with caveats, with"
    why = f"{p.label}'s choice"
    if p.prefill and p.prefill != p.decode:
        why += f" for decode; prefill via {p.prefill}"
        if p.prefill_note:
            why += f", {p.prefill_note}"
    elif p.prefill_note:
        why += f"; {p.prefill_note}"
    if p.page_size is not None:
        why += f", page size {p.page_size}"
    return f"{lead} {p.decode} ({why})"


def summary(d: Decision) -> str:
    """One sentence: the verdict's reason, as the case that decided it."""
    where, case, det = d.where, d.case, d.detail
    label = d.pick.label if d.pick is not None else None
    uses = "; ".join(f"{p}: {k}" for p, k in d.use.items())
    if case == "HARDWARE":
        return f"{where}: {det['message']}"
    if case == "CTX_OVER_MODEL":
        why = (f"{label or 'the engine'} refuses a longer context unless {det['override']}" if det.get("override")
               else "serving engines refuse a context longer than the model's config allows")
        return f"{where}: ctx {det['ctx']:,} exceeds {det['model']}'s max_position_embeddings {det['limit']:,} ({why})"
    if case == "ENGINE_REFUSES":
        assert d.pick is not None
        return f"{where}: {label} refuses to start: {d.pick.error}"
    if case == "ENGINE_DEPENDS":
        assert d.pick is not None
        return f"{where}: {label}'s choice {d.pick.error}"
    if case == "UNMODELLED_MEMORY":
        flags = "; ".join(f"{f} ({what})" for f, what in det["flags"].items())
        m = d.memory or {}
        alone = (f"KV {_gb(m['kv_bytes'])} GB would fit in {_gb(m['available_bytes'])} GB" if m.get("fits")
                 else f"it would not fit ({_no_fit(d).partition(': ')[2]})")
        return (f"{where}: memory not decided: the serve line sets {flags}, which kb does not model; without it, "
                f"{alone}")
    if case == "POOL_EDGE":
        return f"{where}: too close to call: {_edge(d)}"
    if case == "POOL_REFUSES":
        m = d.memory or {}
        conc = m.get("concurrency")
        more = f" (maximum concurrency {conc:.2f}x)" if isinstance(conc, int | float) and conc < 1 else ""
        return f"{where}: {m.get('engine')} would stop at start-up: {m.get('engine_error')}{more}"
    if case == "NO_FIT":
        return f"{where}: {_no_fit(d)}"
    if case == "ENGINE_NOT_RECORDED":
        assert d.pick is not None
        return f"{where}: {label} is not recorded; {d.pick.between}"
    if case == "ENGINE_KERNELS_REFUSE":
        assert d.pick is not None
        return (f"{where}: starts with {d.pick.decode} ({label}'s choice), but kb's claims about the builds it "
                f"calls ({', '.join(det['builds'])}) refuse its call for every kernel it runs "
                f"({', '.join(det['kernels'])}): expect a failure at first use")
    if case == "ENGINE_FAILS":
        assert d.pick is not None
        return f"{where}: starts with {d.pick.decode} ({label}'s choice), then fails at first use: {_failure(det)}"
    if case == "DTYPE_UNREAD":
        assert d.pick is not None
        return (f"{where}: starts with {d.pick.decode} ({label}'s choice) if the checkpoint's torch_dtype is bfloat16 "
                f"(not read: the checkpoint is known by its name only); if it is float16, as AWQ/GPTQ exports often "
                f"are, it then fails at first use: {_failure(det, more=True)}{_fits(d)}")
    if case == "ENGINE":
        return f"{where}: {_engine_yes(d)}{_fits(d)}{_short(d)}"
    if case == "NO_KERNEL_COVERS":
        return f"{where}: no kernel in the KB covers {', '.join(d.blocking)}"
    if case == "REJECTED":
        return f"{where}: every kernel is rejected for {', '.join(d.blocking)}{_fits(d)}"
    if case == "YES" and not d.caveats:
        return f"{where}: yes ({uses}){_fits(d)}"
    if case in ("CAVEATS", "YES"):
        kernel = any(s == "caveat" for s in d.phases.values())
        return f"{where}: yes with {'' if kernel else 'hardware '}caveats ({uses}){_fits(d)}"
    if case == "DISPUTED":
        return f"{where}: {', '.join(d.blocking)} rests on a disputed claim{_fits(d)}"
    if case == "UNKNOWN":
        return f"{where}: the KB does not know enough to answer for {', '.join(d.blocking)}{_fits(d)}"
    return f"{where}: depends on {', '.join(d.blocking)}, not given{_fits(d)}"


def _ranking(ranking: dict[str, Any]) -> str:
    parts = []
    for phase, r in ranking.items():
        top = r["ranking"][0]
        if r["winner"]:
            parts.append(f"{phase}: {top['kernel']} ({top['backend']}) fastest, a clear winner by {r['ratio']}x")
        else:
            parts.append(f"{phase}: fastest measured {top['kernel']} ({top['backend']}), no clear winner")
    return "; ".join(parts)


def answer_summary(a: Answer) -> str:
    """The answer's summary: its decision's sentence, and what was measured on this GPU where it ranks kernels."""
    assert a.decision is not None
    text = summary(a.decision)
    if a.ranking:
        text += f"; measured on {a.query.get('gpu')}: {_ranking(a.ranking)}"
    return text


ASPECTS = (("prefill", "prefill backend"), ("decode", "decode backend"), ("page_size", "paged-KV block (page) size"),
           ("pool_tokens", "KV pool tokens at start-up"))


def differences(c: EngineComparison) -> list[str]:
    """Where the engines' answers differ, one sentence each (verdict, backends, page size, pool tokens)."""
    digests = c.digest
    out: list[str] = []
    if len({d["verdict"] for d in digests}) > 1:
        out.append("verdict: " + "; ".join(f"{d['label']} {d['verdict']}" for d in digests)
                   + "".join(f" ({d['label']}: {d['error']})" for d in digests if d.get("error")))
    for key, what in ASPECTS:
        values = [d.get(key) for d in digests]
        if any(v is None for v in values) or len(set(values)) < 2:
            continue
        shown = "; ".join(f"{d['label']} {d[key]:,}" if isinstance(d[key], int) else f"{d['label']} {d[key]}"
                          for d in digests)
        why = [f"{d['label']}: {d[f'{key}_why']}" for d in digests if d.get(f"{key}_why")]
        out.append(f"{what}: {shown}" + (f" ({'; '.join(why)})" if why else ""))
    return out


def word(answer: Answer | MultiAnswer | EngineComparison) -> None:
    """Fill in the sentences of an answer (its summary; rows' and comparisons' too) from its data."""
    from kbtool.solve.answer import Answer, EngineComparison

    if isinstance(answer, Answer):
        answer.summary = answer_summary(answer)
        return
    for row in answer.rows:
        word(row)
    if isinstance(answer, EngineComparison):
        answer.differences = differences(answer)
        return
    counts = {v: sum(r.verdict == v for r in answer.rows) for v in ("yes", "conditional", "no", "unknown")}
    answer.summary = f"{len(answer.rows)} accelerators: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    if answer.verdict and len(answer.rows) > 1:  # the same on every GPU: the line's answer, whichever GPU it ran on
        answer.summary += f" ({answer.verdict} whatever the GPU)"
