"""`kb matrix`: the support matrix, kernels x accelerators, for one KV dtype, head dim and phase.

A cell is ok, caveat, rejected, unknown, or "gate refuted": a kernel that is not rejected although a gate
recorded in the KB would reject it, because probes refuted that gate.
"""

from __future__ import annotations

import html
import json
from typing import Any

from kbtool.kb import KB
from kbtool.model import Claim
from kbtool.solve.answer import Answer, MultiAnswer
from kbtool.solve.parts import KernelAnswer, Reason

STATES = ("ok", "caveat", "gate refuted", "disputed", "unknown", "rejected")
LEGEND = {
    "ok": "Every gate the KB records passes.",
    "caveat": "Runs, with a caveat (accuracy, performance or an input the query left open).",
    "gate refuted": "A recorded gate would reject it, but probes refuted that gate; not enforced.",
    "disputed": "The only gate that fails is disputed here: sources disagree and no probe settled it in this scope.",
    "unknown": "A gate depends on an input the matrix does not fix, or the KB records nothing about an axis.",
    "rejected": "A gate rejects it (or the kernel does not serve this phase).",
}
COLOURS = {"ok": "#2e7d32", "caveat": "#f9a825", "gate refuted": "#7b1fa2", "disputed": "#ef6c00",
           "unknown": "#9e9e9e",
           "rejected": "#c62828"}


def _refuted_reject(kb: KB, k: KernelAnswer) -> list[Reason]:
    out = []
    for r in k.refuted:
        c = kb.get(r.claim)
        if isinstance(c, Claim) and c.effect == "reject" and not r.depends_on:
            out.append(r)
    return out


def cell(kb: KB, k: KernelAnswer) -> dict[str, Any]:
    refuted = _refuted_reject(kb, k)
    state = "gate refuted" if refuted and k.status != "rejected" else k.status
    shown = refuted if state == "gate refuted" else k.reasons if k.reasons else k.caveats
    reasons = [{"claim": r.claim or None, "code": r.code, "message": r.message, "verification": r.verification}
               for r in shown]
    return {"state": state, "status": k.status, "phase_status": k.phase_status, "reasons": reasons}


def matrix(kb: KB, *, kv: str | None = None, head_dim: int | None = None, phase: str | None = None,
           attention: str | None = None) -> dict[str, Any]:
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    q = build_query(kv=kv or "bf16", head_dim=128 if head_dim is None else head_dim, phase=phase)
    q.attention = attention
    ans = solve(kb, q)
    rows = ans.rows if isinstance(ans, MultiAnswer) else [ans]
    gpus = [str(a.query["gpu"]) for a in rows]
    kernels = sorted({k.id for a in rows for k in a.kernels})
    cells: dict[str, dict[str, Any]] = {k: {} for k in kernels}
    for a in rows:
        assert isinstance(a, Answer)
        for k in a.kernels:
            cells[k.id][str(a.query["gpu"])] = cell(kb, k)
    counts = {s: sum(c["state"] == s for row in cells.values() for c in row.values()) for s in STATES}
    return {"query": {"kv": q.kv, "head_dim": q.head_dim, "phase": q.as_dict()["phase"], "attention": attention},
            "kernels": kernels, "gpus": gpus, "cells": cells, "counts": counts, "legend": LEGEND}


def _why(c: dict[str, Any]) -> str:
    return "; ".join(f"{r['message']} [{r['claim'] or r['code']}: {r['verification']}]" for r in c["reasons"])


def to_markdown(m: dict[str, Any]) -> str:
    q = m["query"]
    lines = [f"Support matrix: kv {q['kv']}, head dim {q['head_dim']}, phase {q['phase']}", "",
             "| kernel | " + " | ".join(m["gpus"]) + " |", "|---|" + "---|" * len(m["gpus"])]
    for k in m["kernels"]:
        row = [m["cells"][k].get(g, {"state": ""})["state"] for g in m["gpus"]]
        lines.append(f"| {k} | " + " | ".join(row) + " |")
    lines += ["", "Legend: " + "; ".join(f"**{s}**: {d}" for s, d in m["legend"].items()), "",
              "Counts: " + ", ".join(f"{s} {n}" for s, n in m["counts"].items())]
    return "\n".join(lines) + "\n"


_CSS = """body{font:13px system-ui,sans-serif;margin:16px;color:#222}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 6px}
th.g{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;white-space:nowrap}
td.c{width:22px;height:18px;cursor:pointer;text-align:center;color:#fff;font-size:11px}
td.c:hover{outline:2px solid #000}#detail{margin-top:12px;padding:8px;border:1px solid #999;min-height:40px;
max-width:900px;white-space:pre-wrap}.legend span{display:inline-block;width:14px;height:14px;
vertical-align:middle;margin:0 4px 0 12px}"""
_SYMBOL = {"ok": "\u2713", "caveat": "!", "gate refuted": "R", "disputed": "D", "unknown": "?", "rejected": "\u2717"}

_JS = """(function(){
var errors=[];window.addEventListener('error',function(e){errors.push(String(e.message))});
function report(){var cells=document.querySelectorAll('td.c');var counts={};
for(var i=0;i<cells.length;i++){var s=cells[i].getAttribute('data-state');counts[s]=(counts[s]||0)+1;}
document.getElementById('selfcheck').textContent=JSON.stringify({cells:cells.length,counts:counts,errors:errors});}
try{var detail=document.getElementById('detail');
document.getElementById('m').addEventListener('click',function(ev){var t=ev.target;
if(!t.classList||!t.classList.contains('c'))return;
detail.textContent=t.getAttribute('data-kernel')+' on '+t.getAttribute('data-gpu')+': '+
t.getAttribute('data-state')+'\\n'+(t.getAttribute('title')||'');});}catch(e){errors.push(String(e));}
report();})();"""


def to_html(m: dict[str, Any]) -> str:
    q = m["query"]
    e = html.escape
    title = f"kb support matrix: kv {q['kv']}, head dim {q['head_dim']}, phase {q['phase']}"
    head = "".join(f'<th class="g">{e(g)}</th>' for g in m["gpus"])
    body = []
    for k in m["kernels"]:
        tds = []
        for g in m["gpus"]:
            c = m["cells"][k].get(g)
            if c is None:
                tds.append("<td></td>")
                continue
            s = c["state"]
            tip = f"{k} on {g}: {s}" + (f"\n{_why(c)}" if c["reasons"] else "")
            tds.append(f'<td class="c" data-state="{e(s)}" data-kernel="{e(k)}" data-gpu="{e(g)}" '
                       f'style="background:{COLOURS[s]}" title="{e(tip)}">{_SYMBOL[s]}</td>')
        body.append(f"<tr><th>{e(k)}</th>{''.join(tds)}</tr>")
    legend = "".join(f'<span style="background:{COLOURS[s]}"></span><b>{e(s)}</b> ({m["counts"][s]}): {e(d)}<br>'
                     for s, d in m["legend"].items())
    data = json.dumps({"kernels": len(m["kernels"]), "gpus": len(m["gpus"])})
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
            f"<style>{_CSS}</style></head><body><h1>{e(title)}</h1>"
            f'<p>Hover or click a cell for the reason and the claim behind it.</p>'
            f'<table id="m" data-expected=\'{e(data)}\'><thead><tr><th>kernel</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table><div id="detail">Click a cell.</div>'
            f'<div class="legend"><h2>Legend</h2>{legend}</div>'
            f'<pre id="selfcheck" style="display:none"></pre><script>{_JS}</script></body></html>\n')
