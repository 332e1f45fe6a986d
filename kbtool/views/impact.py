"""`kb graph impact CLAIM`: what would change if the claim flipped (refuted <-> enforced).

Re-solves a grid of accelerators x KV dtypes x head dims with the claim as recorded and with its status
flipped, and diffs the answers: which kernels and engine backends change status, and in which cells.
"""

from __future__ import annotations

from typing import Any

from kbtool.kb import KB
from kbtool.model import Accelerator, Claim, EngineBackend
from kbtool.solve.answer import Answer, MultiAnswer
from kbtool.vocab import KV_DTYPES

HEAD_DIMS = (64, 128, 256, 512)
Cell = tuple[str, str, int]  # (gpu, kv, head_dim)
Snapshot = dict[Cell, tuple[str, dict[str, str], dict[str, str]]]  # verdict, kernel status, backend status


def flipped(kb: KB, claim: Claim) -> tuple[KB, str]:
    """A copy of the KB with the claim's status flipped: refuted -> unverified (enforced), else -> refuted."""
    new_status = "unverified" if claim.verification.status == "refuted" else "refuted"
    # the per-scope verdicts flip with it: the claim is then refuted (or enforced) everywhere
    ver = claim.verification.model_copy(update={"status": new_status, "verdicts": [],
                                                "evidence": [] if new_status == "refuted" else
                                                claim.verification.evidence})
    repl = claim.model_copy(update={"verification": ver})
    out = KB.from_records([repl if r.id == claim.id else r for r in kb])
    out.where = kb.where
    return out, new_status


def solve_cells(kb: KB, cells: list[Cell], engine: str) -> tuple[Snapshot, dict[Cell, set[str]]]:
    """Solve the given cells: one multi-GPU solve per (kv, head dim) that covers every accelerator, else one
    solve per GPU. Returns the snapshot and the claims each cell used."""
    from kbtool.solve.imagebuild import image_of
    from kbtool.solve.query import Query
    from kbtool.solve.solver import solve

    img = image_of(kb)  # built once for every solve below
    accs = {a.id for a in kb.of_kind("accelerator", Accelerator)}
    groups: dict[tuple[str, int], set[str]] = {}
    for gpu, kv, hd in cells:
        groups.setdefault((kv, hd), set()).add(gpu)
    snap: Snapshot = {}
    used: dict[Cell, set[str]] = {}
    for (kv, hd), gpus in sorted(groups.items()):
        if gpus >= accs:
            ans = solve(img, Query(kv=kv, head_dim=hd, engine=engine))
            rows: list[Answer | MultiAnswer] = list(ans.rows) if isinstance(ans, MultiAnswer) else [ans]
        else:
            rows = [solve(img, Query(gpu=g, kv=kv, head_dim=hd, engine=engine)) for g in sorted(gpus)]
        for a in rows:
            assert isinstance(a, Answer)
            cell = (str(a.query["gpu"]), kv, hd)
            if cell[0] not in gpus:
                continue
            snap[cell] = (a.verdict, {k.id: k.status for k in a.kernels}, {b.id: b.status for b in a.backends})
            used[cell] = set(a.claims_used)
    return snap, used


def _diff(before: Snapshot, after: Snapshot) -> list[dict[str, Any]]:
    out = []
    for cell in sorted(before):
        vb, kb_, bb = before[cell]
        va, ka, ba = after[cell]
        ks = [{"id": k, "before": kb_[k], "after": ka.get(k)} for k in sorted(kb_) if kb_[k] != ka.get(k)]
        bs = [{"id": b, "before": bb[b], "after": ba.get(b)} for b in sorted(bb) if bb[b] != ba.get(b)]
        if ks or bs or vb != va:
            gpu, kv, hd = cell
            out.append({"gpu": gpu, "kv": kv, "head_dim": hd, "verdict_before": vb, "verdict_after": va,
                        "kernels": ks, "backends": bs})
    return out


def _grid(kb: KB, kvs: tuple[str, ...], head_dims: tuple[int, ...]) -> list[Cell]:
    gpus = sorted(a.id for a in kb.of_kind("accelerator", Accelerator))
    return [(g, kv, hd) for g in gpus for kv in kvs for hd in head_dims]


def _changes(kb: KB, other: KB, claim: str, cells: list[Cell], engine: str) -> list[dict[str, Any]]:
    """Diff of the two KBs over `cells`; only cells whose answer used the claim are solved twice."""
    before, used = solve_cells(kb, cells, engine)
    touched = [c for c in cells if claim in used.get(c, set())]
    after = dict(before)
    after.update(solve_cells(other, touched, engine)[0])
    return _diff(before, after)


def impact(kb: KB, name: str, *, kvs: tuple[str, ...] = KV_DTYPES, head_dims: tuple[int, ...] = HEAD_DIMS,
           engine: bool | None = None) -> dict[str, Any]:
    """The answers that change when CLAIM flips.

    Kernel-layer answers are solved without an engine. With vLLM backends in the KB (or engine=True), the
    cells that changed (every cell, for a claim about an engine backend) are solved again with --engine vllm
    to find the backends that change. A cell whose answer did not use the claim cannot change.
    """
    rec = kb.resolve(name, "claim")
    assert isinstance(rec, Claim)
    other, new_status = flipped(kb, rec)
    grid = _grid(kb, kvs, head_dims)
    about_backend = isinstance(kb.get(rec.subject), EngineBackend)
    has_vllm = any(b.engine == "vllm" for b in kb.of_kind("engine-backend", EngineBackend))
    direct = [] if about_backend else _changes(kb, other, rec.id, grid, "none")
    for ch in direct:
        ch.pop("backends")
    eng_rows: list[dict[str, Any]] = []
    if engine or (engine is None and has_vllm):
        cells = grid if about_backend else [(c["gpu"], c["kv"], c["head_dim"]) for c in direct]
        eng_rows = [{**c, "engine": "vllm"} for c in _changes(kb, other, rec.id, cells, "vllm")]
    accs = len(kb.of_kind("accelerator", Accelerator))
    now = "refuted, not enforced" if rec.verification.status == "refuted" else "enforced"
    return {
        "claim": rec.id, "subject": rec.subject, "effect": rec.effect, "status": rec.verification.status,
        "flipped_to": new_status, "now": now, "then": "enforced" if new_status != "refuted" else "refuted",
        "grid": {"accelerators": accs, "kv": list(kvs), "head_dims": list(head_dims), "phase": "both",
                 "engine": "vllm" if eng_rows or (engine or (engine is None and has_vllm)) else "none",
                 "cells": len(grid)},
        "kernels": sorted({k["id"] for c in direct + eng_rows for k in c["kernels"]}),
        "backends": sorted({b["id"] for c in eng_rows for b in c["backends"]}),
        "gpus": sorted({c["gpu"] for c in direct + eng_rows}),
        "verdicts_changed": sum(c["verdict_before"] != c["verdict_after"] for c in direct),
        "changes": direct,
        "engine_changes": eng_rows,
    }
