"""Conformance: kb's replay of vLLM's KV-cache planning (kbtool/solve/engines/vllm/planning.py, pool.groups,
pool.report) against every point the vllm-kv-planning probe recorded from vLLM's own code
(tests/data/vllm/<release>/kv-planning.json.gz, written by `kb probe run --probe vllm-kv-planning`): the KV cache
groups, num_blocks, "GPU KV cache size", "Maximum concurrency", and the start-up check with its exact error text.
No vLLM needed. The per-case tests below pin the cases of issue 44, each citing the vLLM lines it follows."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from kbtool.query_cli import image
from kbtool.solve.engines.vllm import planning as vllm_planning
from kbtool.solve.engines.vllm import pool as vllm_pool

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm"
RAW = sorted(DATA.glob("*/kv-planning.json.gz"))
SPEC_KIND = {"FullAttentionSpec": "full", "SlidingWindowSpec": "sliding", "ChunkedLocalAttentionSpec": "chunked",
             "MLAAttentionSpec": "mla", "MambaSpec": "mamba"}


@functools.cache
def _doc(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def _point(p: dict[str, Any]) -> vllm_planning.Point:
    return vllm_planning.Point(p["max_model_len"], p["batched_tokens"], async_scheduling=p["async"],
                               pp=p.get("pp", 1), v2=p.get("v2_runner", True),
                               mamba_mode=p.get("mamba_mode") or "none", checkpoint_blocks=p.get("checkpoint_blocks") or 0)


def replay(doc: dict[str, Any], plan: vllm_planning.Planning | None = None) -> tuple[int, list[str]]:
    """(points compared, mismatches): every recorded point of one release replayed by kb."""
    img = image()
    plan = plan or vllm_planning.planning(doc["vllm"])
    acct = vllm_pool.accounting(doc["vllm"])
    n, bad = 0, []
    for case in doc["cases"]:
        where = f"{doc['vllm']} {case['model']} kv {case['kv']} tp {case['tp']} block {case['block']}"
        model = img.model(case["model"])
        spec = vllm_pool.specs(model, case["kv"], case["block"], case["tp"])
        recorded_input = {k: case[k] for k in ("dtype", "cache_dtype", "block", "mla", "layers")}
        if spec != recorded_input:
            bad.append(f"{where}: kb's specs for the model changed since the recording: {spec} != {recorded_input}")
            continue
        grouped = vllm_pool.groups(model, case["kv"], case["block"], case["tp"])
        assert grouped is not None
        gs = grouped[0]
        for p in case["points"]:
            if "exception" in p:
                bad.append(f"{where} {p}: vLLM raised outside its start-up check: {p['exception']}")
                continue
            n += 1
            at = f"{where} avail {p['available']} len {p['max_model_len']} batched {p['batched_tokens']} async " \
                 f"{p['async']} mamba {p.get('mamba_mode')}/{p.get('checkpoint_blocks')}"
            vgroups = p.get("groups") or case["groups"]
            if p.get("starts") and vgroups is not None:
                theirs = sorted((SPEC_KIND.get(g["spec"], g["spec"]), g["layers"], g["page"]) for g in vgroups)
                ours = sorted((g.kind, g.layers, g.page_bytes) for g in gs)
                if theirs != ours:
                    bad.append(f"{at}: groups {ours} != vLLM's {theirs}")
                    continue
            r = vllm_pool.report(p["available"], grouped, case["block"], _point(p), acct, plan)
            if r.starts != p["starts"]:
                bad.append(f"{at}: starts {r.starts} != vLLM's {p['starts']} ({p.get('error') or r.error})")
            elif not r.starts and r.error != p["error"]:
                bad.append(f"{at}: error\n  kb:   {r.error}\n  vLLM: {p['error']}")
            elif r.starts and (r.num_blocks, r.tokens, r.concurrency) != (p["num_blocks"], p["tokens"],
                                                                          p["concurrency"]):
                bad.append(f"{at}: blocks/tokens/concurrency {(r.num_blocks, r.tokens, r.concurrency)} != vLLM's "
                           f"{(p['num_blocks'], p['tokens'], p['concurrency'])}")
    return n, bad


@pytest.mark.parametrize("path", RAW, ids=[p.parent.name for p in RAW])
def test_kb_replays_every_recorded_point_of_vllms_planning(path: Path) -> None:
    n, bad = replay(_doc(path))
    assert n > 1000
    assert not bad, f"{len(bad)} of {n} points differ; first: " + "\n".join(bad[:8])


def test_recordings_cover_the_releases_of_issue_44() -> None:
    assert {p.parent.name for p in RAW} >= {"0.24.0", "0.33.0", "0.34.0"}


def test_the_replay_can_fail_a_wrong_planning_line() -> None:
    """0.33.0's points replayed with 0.24.0's line (one batch in flight, no null block) must not all agree."""
    doc = _doc(DATA / "0.33.0" / "kv-planning.json.gz")
    _, bad = replay(doc, vllm_planning.planning("0.24.0"))
    assert len(bad) > 100
