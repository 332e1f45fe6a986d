"""kb's vLLM replay held to what vLLM itself recorded, point by point: the serving defaults against the
vllm-engine-config probe's grids (tests/data/vllm/<release>/engine-config.json.gz) and the KV-cache planning against
the vllm-kv-planning probe's (kv-planning.json.gz). One implementation for the conformance tests
(tests/solve/engines/vllm/test_engine_release.py, tests/solve/test_vllm_planning.py) and for drafting a new
release's engine-release record (draft.py), which must replay its own release's points with 0 mismatches.

Each replay returns (points compared, one line per difference); no vLLM is needed.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from kbtool.solve.engines.vllm import defaults as vd
from kbtool.solve.engines.vllm import planning as vllm_planning
from kbtool.solve.engines.vllm import pool as vllm_pool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.image import Image

CONFIG_PROBE = "vllm-engine-config"
PLANNING_PROBE = "vllm-kv-planning"
SPEC_KIND = {"FullAttentionSpec": "full", "SlidingWindowSpec": "sliding", "ChunkedLocalAttentionSpec": "chunked",
             "MLAAttentionSpec": "mla", "MambaSpec": "mamba"}


def load_raw(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def evidence_grids(records: Path, root: Path, probe: str, release: str | None = None) -> list[dict[str, Any]]:
    """The raw grid of every complete run of `probe` under records/evidence (only `release`'s where given), oldest
    evidence first, each with its evidence id under "evidence"."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out = []
    for path in sorted((records / "evidence").glob(f"*-{probe}*.yaml")):
        ev = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
        if not isinstance(ev, dict) or (ev.get("probe") or {}).get("id") != probe:
            continue
        if release is not None and ((ev.get("environment") or {}).get("libraries") or {}).get("vllm") != release:
            continue
        for case in ev.get("cases") or []:
            raw = (case.get("metrics") or {}).get("raw")
            if case.get("outcome") == "OK" and raw and (root / raw).is_file():
                out.append({"evidence": ev["id"], **load_raw(root / raw)})
    return out


def expected(point: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """What vLLM resolved at one point of an engine-config grid, in kb's terms."""
    r = point["resolved"]
    util = r.get("resolved_gpu_memory_utilization")
    runner = r.get("use_v2_model_runner")
    if runner is None:  # no V1/V2 choice in this release: the one runner it has
        runner = not (doc.get("release") or {}).get("v1_model_runner_module", True)
    return {
        "max_num_batched_tokens": r["max_num_batched_tokens"], "max_num_seqs": r["max_num_seqs"],
        "block_size": r["block_size"], "utilization": util if util is not None else r["gpu_memory_utilization"],
        "async_scheduling": bool(r["async_scheduling"]), "chunked_prefill": bool(r["enable_chunked_prefill"]),
        "prefix_caching": bool(r["enable_prefix_caching"]), "state_cache": r.get("mamba_cache_mode") or "none",
        "model_runner": "V2" if runner else "V1", "cudagraph_mode": str(r["cudagraph_mode"]).split(".")[-1],
        "capture_max": r["cudagraph_capture_sizes"]["max"],
        "extensible_kv_cache": bool(r.get("enable_extensible_kv_cache")),
        "kv_auto": {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(r["model_dtype"], r["model_dtype"]),
    }


def replayed(img: Image, release: str, point: dict[str, Any], row: dict[str, Any] | None = None) -> dict[str, Any]:
    """What kb resolves for the same point from its records only (`row`: this engine-release row instead of the
    image's record for `release`)."""
    memory, name, cc = vd.accelerator_facts(img, point["accelerator"])
    model = img.model(point["model"])
    if not memory or not cc:
        raise ValueError(f"{point['accelerator']}: no memory or compute capability recorded")
    if row is None:
        d = vd.serve_defaults(img, release, memory, name, cc, point["max_model_len"], model.architecture)
        if d is None:
            raise ValueError(f"no engine-release record for vLLM {release}")
    else:
        d = vd.of_row(row, release, release, memory, name, cc, point["max_model_len"], model.architecture)
    hybrid = any(g.type == "linear" for g in model.layers)
    block = d.block_size
    if hybrid and d.hybrid_block_at_config:  # the config widens the block for the state page (kb: vllm_mamba)
        grouped = vllm_pool.groups(model, "bf16", d.block_size)
        if grouped is None:
            raise ValueError(f"{point['model']}: kb cannot group its KV pages at block {d.block_size}")
        block = grouped.block
    return {
        "max_num_batched_tokens": d.max_num_batched_tokens, "max_num_seqs": d.max_num_seqs,
        "block_size": block, "utilization": d.utilization, "async_scheduling": d.async_scheduling,
        "chunked_prefill": d.chunked_prefill,
        "prefix_caching": d.hybrid_prefix_caching if hybrid else d.prefix_caching,
        "state_cache": d.hybrid_state_cache if hybrid else "none", "model_runner": d.runner(model),
        "cudagraph_mode": d.cudagraph_mode, "capture_max": d.capture_max,
        "extensible_kv_cache": d.extensible_kv_cache,
        "kv_auto": vd.auto_dtype(model.unquantized_dtype or model.weight_dtype, cc)
        if d.kv_cache_dtype_auto == "model" else d.kv_cache_dtype_auto,
    }


def config_mismatches(img: Image, docs: list[dict[str, Any]], row: dict[str, Any] | None = None
                      ) -> tuple[int, list[str]]:
    """(points compared, one line per field where kb and vLLM differ) over engine-config grids; `row`: replay every
    grid with this engine-release row (a draft) instead of the image's records."""
    n, bad = 0, []
    for doc in docs:
        for point in doc["rows"]:
            if "error" in point["resolved"]:
                continue
            n += 1
            want, got = expected(point, doc), replayed(img, doc["vllm"], point, row)
            bad += [f"vLLM {doc['vllm']} {point['accelerator']} {point['model']} {k}: vLLM {want[k]!r}, kb {got[k]!r}"
                    for k in want if want[k] != got[k]]
    return n, bad


def _point(p: dict[str, Any]) -> vllm_planning.Point:
    return vllm_planning.Point(p["max_model_len"], p["batched_tokens"], async_scheduling=p["async"],
                               pp=p.get("pp", 1), v2=p.get("v2_runner", True), mamba_mode=p.get("mamba_mode") or "none",
                               checkpoint_blocks=p.get("checkpoint_blocks") or 0)


def planning_mismatches(img: Image, doc: dict[str, Any], plan: vllm_planning.Planning | None = None,
                        acct: vllm_pool.Accounting | None = None) -> tuple[int, list[str]]:
    """(points compared, mismatches): every recorded point of one release's kv-planning grid replayed by kb with
    `plan` (default: the release's own line) and `acct` (default: the release's accounting)."""
    plan = plan or vllm_planning.planning(doc["vllm"])
    acct = acct or vllm_pool.accounting(doc["vllm"])
    n, bad = 0, []
    for case in doc["cases"]:
        where = f"{doc['vllm']} {case['model']} kv {case['kv']} tp {case['tp']} block {case['block']}"
        model = img.model(case["model"])
        spec = vllm_pool.specs(model, case["kv"], case["block"], case["tp"])
        recorded_input = {k: case[k] for k in ("dtype", "cache_dtype", "block", "mla", "layers")}
        if spec != recorded_input:
            bad.append(f"{where}: kb's specs for the model changed since the recording: {spec} != {recorded_input}")
            continue
        grouped = vllm_pool.groups(model, case["kv"], case["block"], case["tp"], sliding_v=plan.sliding_v)
        if grouped is None:  # kb says this release cannot unify the pages: vLLM must raise at every point
            for p in case["points"]:
                n += 1
                if not str(p.get("exception", "")).startswith("NotImplementedError"):
                    bad.append(f"{where} {p}: kb finds the pages not unifiable, vLLM planned them")
            continue
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
                theirs = sorted((SPEC_KIND.get(g["spec"], g["spec"]), g["layers"], g["page"],
                                 tuple(map(tuple, g.get("pages") or ()))) for g in vgroups)
                ours = sorted((g.kind, g.layers, g.page_bytes, tuple((x[0], x[1]) for x in g.pages or ())) for g in gs)
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
