"""Values: facts point at real sources, numbers are sane, conditions use known variables and values."""

from __future__ import annotations

from typing import Any

from kbtool.checks import check
from kbtool.findings import Finding
from kbtool.kb import KB
from kbtool.model import Accelerator, Architecture, Claim, Kernel
from kbtool.model.common import All, AnyOf, Condition, Fact, Leaf, Not
from kbtool.model.engine_backend import EngineBackend
from kbtool.model.engine_priority import EnginePriority
from kbtool.model.engine_release import EngineRelease
from kbtool.vocab import VARS

_NONNEG = ("sm_count", "memory_gb", "memory_bytes", "memory_bandwidth_tbs", "l2_mb", "bf16_dense_tflops",
           "fp8_dense_tflops", "tdp_w", "smem_per_sm_kib", "smem_per_block_kib", "tmem_kib")
_MAX = 1e15


def _facts(rec: Any) -> list[tuple[tuple[str | int, ...], Fact[Any]]]:
    """(path, fact) of every fact field of a record, and of every fact in a list field (device_names)."""
    out: list[tuple[tuple[str | int, ...], Fact[Any]]] = []
    for name in type(rec).model_fields:
        v = getattr(rec, name)
        if isinstance(v, Fact):
            out.append(((name,), v))
        elif isinstance(v, list):
            out += [((name, i), x) for i, x in enumerate(v) if isinstance(x, Fact)]
    return out


@check("KB301", "fact-without-source", "every fact points at one of its record's sources, or says unverified")
def find_unsourced_facts(kb: KB) -> list[Finding]:
    out = []
    for r in kb:
        for path, fact in _facts(r):
            if fact.source is not None and fact.source >= len(r.sources):
                file, line = kb.location(r.id, *path, "source")
                out.append(Finding("KB301", f"source index {fact.source} but the record has {len(r.sources)} "
                                   "source(s)", file, line, _p((*path, "source")),
                                   fix="point at an entry of `sources` (0-based)", check="fact-without-source"))
            elif fact.source is None and fact.basis == "recorded" and len(r.sources) > 1:
                file, line = kb.location(r.id, *path)
                out.append(Finding("KB301", "recorded fact without a source index, and the record has several "
                                   "sources", file, line, _p(path), fix="add `source: N`",
                                   check="fact-without-source"))
        out += _indexed_sources(kb, r)
    return out


def _indexed_sources(kb: KB, r: Any) -> list[Finding]:
    """KB301 for the sourced parts of a record that are not facts (an engine-priority record's MLA prefill orders
    and calls, an engine backend's kernel calls, a kernel's KV formats and CUDA toolkits): each `source` is one of
    the record's sources."""
    at: list[tuple[tuple[str | int, ...], int]] = []
    if isinstance(r, EnginePriority) and r.mla_prefill is not None:
        at += [(("mla_prefill", "lists", i), pl.source) for i, pl in enumerate(r.mla_prefill.lists)]
        at += [(("mla_prefill", "calls", name), c.source) for name, c in r.mla_prefill.calls.items()]
    if isinstance(r, EngineRelease):  # its facts sit in sections; tiers and margins cite sources too
        for section in ("defaults", "planning", "accounting", "speculative"):  # vLLM's lines too
            block = getattr(r, section)
            at += [((section, name), f.source) for name in (type(block).model_fields if block is not None else ())
                   if isinstance(f := getattr(block, name), Fact) and f.source is not None]
        at += [(("batch", i), t.source) for i, t in enumerate(r.batch)]
        at += [(("extensible_margins",), r.extensible_margins.source)] if r.extensible_margins is not None else []
        at += [(("startup_checks", i), c.source) for i, c in enumerate(r.startup_checks)]
    if isinstance(r, EngineBackend):  # each call the backend makes cites the engine's file it was read in
        at += [(("calls", i), c.source) for i, c in enumerate(r.calls)]
    if isinstance(r, Kernel):
        at += [(("kv_formats", i), f.source) for i, f in enumerate(r.kv_formats)]
        at += [(("cuda_toolkits",), r.cuda_toolkits.source)] if r.cuda_toolkits is not None else []
    out = []
    for path, index in at:
        if index >= len(r.sources):
            file, line = kb.location(r.id, *path, "source")
            out.append(Finding("KB301", f"source index {index} but the record has {len(r.sources)} source(s)", file,
                               line, _p((*path, "source")), fix="point at an entry of `sources` (0-based)",
                               check="fact-without-source"))
    return out


def _prefill_values(kb: KB, r: EnginePriority) -> list[Finding]:
    """KB401 for MLA prefill orders: conditions read query variables, `refused` and `calls` name listed backends."""
    assert r.mla_prefill is not None
    out = []
    named = {b for pl in r.mla_prefill.lists for b in pl.order}
    for i, pl in enumerate(r.mla_prefill.lists):
        for path, leaf in _leaves(pl.when, ("mla_prefill", "lists", i, "when")):
            if leaf.var not in VARS:
                file, line = kb.location(r.id, *path)
                out.append(Finding("KB401", f"'{leaf.var}' is not a query variable", file, line, _p(path) + ".var",
                                   fix=f"use one of: {', '.join(VARS)}", check="bad-value"))
        for name in pl.refused:
            if name not in pl.order:
                path = ("mla_prefill", "lists", i, "refused", name)
                file, line = kb.location(r.id, *path)
                out.append(Finding("KB401", f"{name} is refused but not in this order", file, line, _p(path),
                                   fix=f"name a backend of its order: {', '.join(pl.order)}", check="bad-value"))
    for name in r.mla_prefill.calls:
        if name not in named:
            path = ("mla_prefill", "calls", name)
            file, line = kb.location(r.id, *path)
            out.append(Finding("KB401", f"{name} is in no prefill order", file, line, _p(path),
                               fix=f"name a backend the orders list: {', '.join(sorted(named))}", check="bad-value"))
    return out


@check("KB401", "bad-value", "sizes and rates are finite and positive; conditions use known variables")
def find_bad_values(kb: KB) -> list[Finding]:
    out = []
    for r in kb:
        if isinstance(r, Accelerator | Architecture):
            for (name, *_rest), fact in _facts(r):
                if name in _NONNEG and isinstance(fact.value, int | float) and not 0 < fact.value < _MAX:
                    file, line = kb.location(r.id, name, "value")
                    out.append(Finding("KB401", f"{name} = {fact.value!r} is not a positive finite size", file,
                                       line, f"$.{name}.value", fix="give the value in the field's unit",
                                       check="bad-value"))
        if isinstance(r, Claim):
            for field in ("when", "requires"):
                for path, leaf in _leaves(getattr(r, field), (field,)):
                    if leaf.var not in VARS:
                        file, line = kb.location(r.id, *path)
                        out.append(Finding("KB401", f"'{leaf.var}' is not a query variable", file, line,
                                           _p(path) + ".var", fix=f"use one of: {', '.join(VARS)}",
                                           check="bad-value"))
        if isinstance(r, EnginePriority) and r.mla_prefill is not None:
            out += _prefill_values(kb, r)
    return out


@check("KB402", "unknown-condition-value", "condition values name known architectures, GPUs and dtypes")
def find_unknown_condition_values(kb: KB) -> list[Finding]:
    archs = {r.id for r in kb if r.kind == "architecture"}
    gpus = {r.id for r in kb if r.kind == "accelerator"}
    out = []
    for r in kb:
        if not isinstance(r, Claim):
            continue
        for field in ("when", "requires"):
            for path, leaf in _leaves(getattr(r, field), (field,)):
                spec = VARS.get(leaf.var)
                if spec is None:
                    continue
                typ, allowed = spec
                known = archs if leaf.var == "sm" else gpus if leaf.var == "gpu" else set(allowed or ())
                if not known or typ not in ("id", "enum"):
                    continue
                vals = leaf.operand if isinstance(leaf.operand, list) else [leaf.operand]
                for i, v in enumerate(vals):
                    if v not in known:
                        sub = (*path, leaf.op, i) if isinstance(leaf.operand, list) else (*path, leaf.op)
                        file, line = kb.location(r.id, *sub)
                        what = {"sm": "a known architecture", "gpu": "a known accelerator"}.get(leaf.var,
                                                                                                 f"a {leaf.var}")
                        out.append(Finding("KB402", f"{v!r} is not {what}", file, line, _p(sub),
                                           fix=f"use one of: {', '.join(sorted(known))}",
                                           check="unknown-condition-value"))
    return out


def _p(path: tuple[Any, ...]) -> str:
    from kbtool.findings import render_path

    return render_path(path)


def _leaves(c: Condition | None, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], Leaf]]:
    if c is None:
        return []
    if isinstance(c, Leaf):
        return [(path, c)]
    if isinstance(c, All):
        return [x for i, s in enumerate(c.all) for x in _leaves(s, (*path, "all", i))]
    if isinstance(c, AnyOf):
        return [x for i, s in enumerate(c.any) for x in _leaves(s, (*path, "any", i))]
    if isinstance(c, Not):
        return _leaves(c.not_, (*path, "not"))
    return []


def _strings(data: Any, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], str]]:
    """(path, string) for every key and string value in plain record data."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [(path, data)]
    while stack:
        p, v = stack.pop()
        if isinstance(v, str):
            out.append((p, v))
        elif isinstance(v, dict):
            for k, x in v.items():
                out.append(((*p, k), str(k)))
                stack.append(((*p, k), x))
        elif isinstance(v, list):
            stack += [((*p, i), x) for i, x in enumerate(v)]
    return out


@check("KB404", "control-character", "record strings hold no control characters (C0 but tab and newline, DEL, "
       "ESC, C1 such as U+009B/U+009D, bidirectional overrides): a terminal would act on them")
def find_control_characters(kb: KB) -> list[Finding]:
    from kbtool.escape import CONTROL, escape
    from kbtool.findings import render_path

    out = []
    for where in kb.where.values():
        if where.doc.clean:  # the reader saw no control character in it
            continue
        for path, text in _strings(where.data):
            if text.isprintable():
                continue
            m = CONTROL.search(text)
            if m is None:
                continue
            snippet = escape(text[max(0, m.start() - 20): m.end() + 20])
            out.append(Finding("KB404", f"control character {escape(m.group())} in a string: '{snippet}'",
                               where.file, where.doc.line_of(path), render_path(path),
                               fix="remove it (a terminal would act on it); write the text without escapes",
                               check="control-character"))
    return sorted(out)
