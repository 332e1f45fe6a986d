"""Probe: SGLang's own launch defaults and KV pool planning per recorded accelerator and model, without a GPU
(issue 44).

One case per group of recorded NVIDIA accelerators. `run` writes the accelerators (the device name CUDA reports,
kb's capacity in MiB, compute capability, SM count: from the accelerator and architecture records), the recorded
models (their published config.json, tests/data/hf-configs/<id>/config.json), the launch lines (VARIANTS) and the
available-memory fractions (FRACTIONS) to a JSON file, and starts probes/_sglang_pool.py under the interpreter that
has SGLang (KB_SGLANG_PYTHON, else this one). That worker presents each accelerator to SGLang, resolves each launch
line through SGLang's ServerArgs and runs SGLang's KVCacheConfigurator on it (see its docstring): the defaults
SGLang resolves, and per available-memory point the pool it plans (max_total_num_tokens, max_running_requests, the
full / SWA split, Mamba state slots) or the error it raises at start-up, exact text. The document goes to
tests/data/sglang/<release>/pool-<group>.json.gz (KB_SGLANG_RAW_DIR overrides the folder), named in the evidence
with its sha256.

No claim is judged: the recording is replayed by tests/solve/test_sglang_pool_replay.py through kb's SGLang engine
(kbtool/solve/engines/sglang/plan.py), which must agree at every point. summarize() reports that agreement.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, cast

from kbtool.probe.judges import REPO
from kbtool.probe.spec import ProbeSpec

ROOT = REPO


SPEC = ProbeSpec(
    id="sglang-pool",
    version=1,
    order=7,
    title="SGLang launch defaults and KV pool planning per accelerator (no GPU)",
    claims=[],
    requires={"gpu": False, "packages": ["sglang"]},
    timeout_s=3000,
    workers=2,  # no GPU: two cases at once use both cores of a 2-core sweep host (issue 46)
    untestable="The sglang-pool probe needs SGLang installed (KB_SGLANG_PYTHON, tests/data/sglang/README.md).",
)


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    return []  # no claim: the recording is replayed by tests/solve/test_sglang_pool_replay.py


_LONGER = re.compile(r"Warning: User-specified context_length \((\d+)\) is greater than the derived context_length "
                     r"\((\d+)\)")


# SGLang refusals that come from the probe's environment, not from the launch line: the quantization kernels and
# remote code a GPU install brings are absent on the CPU (gpt-oss's mxfp4, Nemotron-Super's custom config), and
# the pinned transformers predates MiMo-V2-Flash
ENVIRONMENT = ("Unknown quantization method:", "The repository ",
               "The checkpoint you are trying to load has model type")


KV_NAMES = {"bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def _want_defaults(d: dict[str, Any]) -> dict[str, Any]:
    att = d.get("attention_backend")
    graph = d.get("decode_graph_max_bs", d.get("cuda_graph_max_bs"))
    return {"prefill": d.get("prefill_attention_backend") or att, "decode": d.get("decode_attention_backend") or att,
            "page_size": d.get("page_size"), "mem_fraction_static": d.get("mem_fraction_static"),
            "chunked_prefill_size": d.get("chunked_prefill_size"), "decode_graph_max_bs": graph,
            "kv": KV_NAMES.get(str(d.get("kv_torch_dtype")), d.get("kv_torch_dtype"))}


def kb_point(img: Any, release: str, acc_id: str, acc: dict[str, Any], model_id: str,
             argv: list[str], env_kept: bool = True) -> dict[str, Any] | None:
    """kb's SGLang answer for one recorded row: its resolved defaults, the pool cell and the planner's inputs.
    `env_kept`: the recording sized the pool under the environment the resolution left, as a launch does (its
    document says "resolution_env": "kept"); an older recording restored it first (_probe_reserve)."""
    from kbtool.solve.engines.sglang import facts as sf
    from kbtool.solve.engines.sglang import pool as sp
    from kbtool.solve.engines.sglang import resolve as sr
    from kbtool.solve.engines.sglang.args import parse_argv

    model = img.model(model_id)
    view = img.accelerator(acc_id)
    if model is None or view is None:
        return None
    args = parse_argv(argv, release).server_args()
    cc = acc["capability"][0] + acc["capability"][1] / 10
    r = sr.resolve(img, release, sf.platform_facts(view, cc, img.cuda), sf.model_facts_from_record(model), args)
    if r.get("error"):
        return {"error": r["error"], "message": r["message"]}
    kv = sp._kv(r.get("kv_cache_dtype"), {}, model)
    cell, _nf, _ns, _left = sp.cell_of(model, kv, 1, mamba_slots=sp.mamba_slots(args),
                                       dsa_backends=(r.get("dsa_prefill_backend"), r.get("dsa_decode_backend")))
    ctx = int(cast(Any, args.get("context_length") or model.max_context or 4096))
    gpu_mib = (view.capacity_bytes() or 0) / 2**20
    return {"prefill": r.get("prefill"), "decode": r.get("decode"), "page_size": r.get("page_size"),
            "mem_fraction_static": r.get("mem_fraction_static"), "chunked_prefill_size": r.get("chunked_prefill_size"),
            "decode_graph_max_bs": r.get("decode_graph_max_bs"), "kv": kv, "_cell": cell, "_ctx": ctx,
            "_args": args, "_reserve": sp.multimodal_reserve_gib(
                model, release, cc=cc, gpu_mib=gpu_mib,
                max_running_requests=cast(Any, args.get("max_running_requests")))
            if env_kept else _probe_reserve(model, release, cc, gpu_mib)}


def _probe_reserve(model: Any, release: str, cc: float, gpu_mib: float) -> float:
    """The multimodal reserve the sglang-pool probe sized with before it kept the resolution's environment (its
    recordings of 0.5.17-0.5.22 made by kb before issue 46's fix). That probe restored os.environ after each
    resolution (probes/_sglang_pool.py), so where SGLang's resolution sets its environment (Qwen3-VL on a large
    Hopper GPU from 0.5.20: SGLANG_VLM_CACHE_SIZE_MB 0, qwen3_vl.py:96-98) the pool was sized with the defaults: the
    embedding cache and the cuda_ipc feature pool, the transport staying set on the server arguments. kb's answers
    reserve what a launch does (pool.py multimodal_reserve_gib)."""
    from kbtool.solve.engines.sglang import pool as sp

    if sp.hopper_qwen3_vl(getattr(model, "architecture", None), release, cc, gpu_mib):
        return (sp.VLM_CACHE_MB + sp.MM_FEATURE_CACHE_MB) / 1024
    return sp.multimodal_reserve_gib(model, release)


def replay(img: Any, doc: dict[str, Any]) -> tuple[Counter[str], list[tuple[Any, ...]]]:
    """Agreement per field over one recorded document, and the points where kb differs (field, point, kb, SGLang).
    A row SGLang refused or could not plan on a CPU is counted, not replayed ("sglang refused" / "unplanned")."""
    from kbtool.solve.engines.sglang.plan import plan

    release = str(doc["sglang"])
    env_kept = doc.get("resolution_env") == "kept"
    tally: Counter[str] = Counter()
    wrong: list[tuple[Any, ...]] = []
    for acc_id, model_id, vi, d, pools in doc["rows"]:
        argv = list(doc["variants"][vi])
        label = (acc_id, model_id, " ".join(argv))
        if "error" in d:
            m = _LONGER.match(d.get("message") or "")
            model = img.model(model_id) if m else None
            if m and model is not None:  # the one refusal kb answers itself: --context-length past the model's
                asked, derived = int(m.group(1)), int(m.group(2))
                if model.max_context == derived and asked > model.max_context:
                    tally["context refusals"] += 1
                else:
                    wrong.append(("context limit", label, model.max_context, derived))
                continue
            if (d.get("message") or "").startswith(ENVIRONMENT):
                tally["not loadable on the CPU probe"] += 1
                continue
            got = kb_point(img, release, acc_id, doc["accelerators"][acc_id], model_id, argv, env_kept)
            if got is not None and (got.get("error"), got.get("message")) == (d["error"], d.get("message")):
                tally["line refusals"] += 1
            else:
                wrong.append(("refusal", label, got and got.get("message"), d.get("message")))
            continue
        if "unplanned" in d or "configurator_error" in d:
            tally["unplanned on a CPU"] += 1
            continue
        got = kb_point(img, release, acc_id, doc["accelerators"][acc_id], model_id, argv, env_kept)
        if got is None:
            tally["no kb record"] += 1
            continue
        if "error" in got:
            wrong.append(("resolution", label, got, None))
            continue
        want = _want_defaults(d)
        for k, v in want.items():
            if got[k] == v:
                tally[k] += 1
            else:
                wrong.append((k, label, got[k], v))
        cell = got["_cell"]
        if cell.bytes == d.get("cell_size"):
            tally["cell"] += 1
        else:
            wrong.append(("cell", label, cell.bytes, d.get("cell_size")))
        pre = (doc["accelerators"][acc_id]["memory_mib"] - doc["context_mib"]) / 1024
        args = got["_args"]
        for f, sgl in zip(doc["fractions"], pools, strict=True):
            p = plan(cell, page_size=int(want["page_size"] or 1),
                     mem_fraction_static=float(want["mem_fraction_static"]), pre_gib=pre, available_gib=pre * f,
                     context_len=got["_ctx"], max_running_requests=args.get("max_running_requests"),
                     max_total_tokens=args.get("max_total_tokens"), reserve_gib=got["_reserve"])
            mine: dict[str, Any] = ({"error": p.error, "message": p.message} if p.error else
                    {"max_total_num_tokens": p.tokens, "max_running_requests": p.max_running_requests})
            if p.error is None and p.state_slots is not None:
                mine["max_mamba_cache_size"] = p.state_slots
            theirs = {k: sgl[k] for k in ("error", "message", "max_total_num_tokens", "max_running_requests",
                                          "max_mamba_cache_size") if k in sgl}
            if mine == theirs:
                tally["pool points"] += 1
                tally["refusals" if p.error else "plans"] += 1
            else:
                wrong.append(("pool", (*label, f), mine, theirs))
    return tally, wrong


def summarize(observations: list[dict[str, Any]], env: dict[str, Any]) -> dict[str, Any]:
    """kb's SGLang engine against SGLang's own planner at every point this run recorded."""
    from kbtool.kb import load_kb
    from kbtool.paths import records_dir
    from kbtool.solve.imagebuild import image_of

    img = image_of(load_kb(records_dir())[0])
    total: Counter[str] = Counter()
    bad = 0
    for obs in observations:
        raw = (obs.get("metrics") or {}).get("raw")
        if obs.get("outcome") != "OK" or not raw:
            continue
        tally, wrong = replay(img, load(ROOT / raw))
        total.update(tally)
        bad += len(wrong)
    return {"agree": dict(sorted(total.items())), "differ": bad}
