"""How far kb's memory estimate is from what vLLM reported, per model class: one derived measurement record.

Every recorded vLLM boot (the measurement rows of the vllm-boot probe's runs) is asked again as a user would ask
it: the boot's flags as a `vllm serve` line, its model's config.json (probes/vllm_boot/models/), its GPU. kb's
"GPU KV cache size" is compared with vLLM's, and the errors are summed up per accelerator, vLLM release and model
class (kbtool/solve/engines/vllm/boots.py:
model_class). A query the boots do not cover says "estimated" and quotes its class's
row. `kb probe boot-error --write` writes the record; tests/probe/test_vllm_boot_memory.py fails when it is stale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbtool.errors import UsageError
from kbtool.model import Measurement, Source
from kbtool.model.measurement import Row
from kbtool.solve.engines.vllm.boots import RECORD_ID

MODELS = Path(__file__).resolve().parents[2] / "probes" / "vllm_boot" / "models"
RECORDS = Path(__file__).resolve().parents[2] / "records"
RISE = "profile_peak_rise_graphs"  # the quantity of the rows graph_rises() gives (boots.graph_rise reads them)


def extra_flags(c: dict[str, Any]) -> str:
    """The flags of a boot's extra engine arguments (kbtool/probe/judges/vllm_boot.py conditions), as a line that
    repeats them writes them: --dtype float32, --language-model-only, --speculative-config,
    --[no-]enable-prefix-caching."""
    line = " --dtype float32" if c.get("dtype") == "fp32" else ""
    if c.get("prefix_caching") is not None:
        line += " --enable-prefix-caching" if c["prefix_caching"] else " --no-enable-prefix-caching"
    line += " --language-model-only" if c.get("text_only") else ""
    if c.get("speculative"):
        method, _, tokens = str(c["speculative"]).partition(":")
        line += f""" --speculative-config '{{"method": "{method}", "num_speculative_tokens": {int(tokens)}}}'"""
    return line


def serve_line(c: dict[str, Any], config: Path) -> str:
    """The `vllm serve` line a boot's conditions stand for."""
    line = (f"serve {config} --max-model-len {c['max_model_len']} --gpu-memory-utilization "
            f"{c['gpu_memory_utilization']} --kv-cache-dtype {c['kv_cache_dtype']} --max-num-batched-tokens "
            f"{c['max_num_batched_tokens']} --max-num-seqs {c['max_num_seqs']}")
    line += " --enforce-eager" if c.get("enforce_eager") else ""
    line += extra_flags(c)
    # a boot that forced the model runner ran with VLLM_USE_V2_MODEL_RUNNER set before the command
    runner = c.get("model_runner")
    return f"VLLM_USE_V2_MODEL_RUNNER={int(runner == 'V2')} vllm {line}" if runner in ("V1", "V2") else line


def errors(image: Any, models: Path = MODELS) -> list[dict[str, Any]]:
    """kb's prediction beside vLLM's for every recorded boot: {case, accelerator, vllm, class, measured,
    predicted, error, concurrency_error}."""
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    out = []
    for acc, c, tokens, concurrency, row_id in image.boots():
        config = models / str(c.get("model")) / "config.json"
        if not config.is_file():
            raise UsageError(f"{row_id}: no config.json for boot model {c.get('model')!r} under {models}",
                             fix="run this from a checkout of the repository (probes/vllm_boot/models)")
        q = build_query(gpu=acc, vllm_args=serve_line(c, config), lib=[f"vllm={c.get('vllm')}"])  # its release
        answer = solve(image, q)
        memory = getattr(answer, "memory", None)  # one GPU asked: one answer
        r = memory.engine_report if memory is not None else None
        if not r or not r.get("estimate"):
            raise UsageError(f"{row_id}: kb gave no vLLM pool for this boot", fix="see `kb query --vllm-args` for it")
        est = r["estimate"]
        out.append({"case": c.get("case"), "accelerator": acc, "vllm": str(c.get("vllm")),
                    "class": r.get("class", "unknown"), "measured": tokens,
                    "predicted": est["kv_cache_tokens"], "error": est["kv_cache_tokens"] / tokens - 1,
                    "concurrency_error": est["max_concurrency"] / concurrency - 1 if concurrency else None})
    return out


RELEASE = "vllm"  # the row condition naming the vLLM release the boots ran (the renderer reads it by this name)


def graph_rises(records: Path = RECORDS) -> list[Row]:
    """How much higher the V2 model runner's profile peak ("torch peak memory increase", metrics.activation_peak_gib)
    was with CUDA graphs than eager, per accelerator and vLLM release, from the vllm-boot evidence: each graphs boot
    against the eager boot of the same model, release and GPU. With graphs the profile forward is the first call of
    the torch.compile'd model (Inductor's buffers, not the eager ops'), which kb does not model; answers quote these
    rows instead (boots.graph_rise). The V1 runner's profile runs the same peak either way (it estimates graph
    memory separately), so only the V2 runner's boots are rows here."""
    import json

    import yaml

    from kbtool.probe.judges.vllm_boot import conditions

    seen: dict[tuple[str, str, str], dict[bool, list[float]]] = {}
    for path in sorted((records / "evidence").glob("*-vllm-boot*.yaml")):
        ev = yaml.safe_load(path.read_text(encoding="utf-8"))
        acc = str(ev["environment"].get("accelerator"))
        for c in ev.get("cases") or []:
            m = c.get("metrics") or {}
            if c.get("outcome") != "OK" or m.get("activation_peak_gib") is None or \
                    ".worker.gpu.model_runner." not in str(m.get("model_runner")):
                continue
            # a boot with other engine arguments (float32, a draft, text only) is another model's peak
            extra = conditions(c["params"].get("engine_args") or {})
            key = (acc, str(m.get("release")), str(c["params"]["model"]) + (
                f" {json.dumps(extra, sort_keys=True)}" if extra else ""))
            seen.setdefault(key, {}).setdefault(bool(c["params"].get("enforce_eager")), []).append(
                float(m["activation_peak_gib"]))
    rises: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for (acc, rel, model), by in sorted(seen.items()):
        if by.get(True) and by.get(False):
            for peak in by[False]:
                rises.setdefault((acc, rel), []).append((model, round(peak - max(by[True]), 4)))
    rows = []
    for (acc, rel), rs in sorted(rises.items()):
        highest: dict[str, float] = {}  # per model, its largest rise (a model booted with graphs twice shows one)
        for m, r in rs:
            highest[m] = max(r, highest.get(m, r))
        rows.append(Row(quantity=RISE, value=round(max(r for _m, r in rs), 4), unit="GiB", accelerator=acc,
                        conditions={RELEASE: rel, "runner": "V2", "boots": len(rs),
                                    "lowest": round(min(r for _m, r in rs), 4),
                                    "highest": round(max(r for _m, r in rs), 4),
                                    "models": ", ".join(f"{m} {r:+.2f}" for m, r in highest.items())}))
    return rows


def record(image: Any, models: Path = MODELS, records: Path = RECORDS) -> Measurement:
    """The derived record: one row per accelerator, vLLM release and model class, citing the boots' evidence; then
    the V2 runner's profile-peak rise with CUDA graphs per accelerator and release (graph_rises)."""
    evidence_ids = sorted({row[4].split("#", 1)[0].removesuffix("-measured") for row in image.boots()})
    groups: dict[tuple[str, str, str], list[float]] = {}
    for e in errors(image, models):
        groups.setdefault((e["accelerator"], e["vllm"], e["class"]), []).append(e["error"])
    rows = [Row(quantity="kv_cache_tokens_error", value=round(max(abs(x) for x in errs), 4), unit="ratio",
                accelerator=acc, conditions={RELEASE: vllm, "class": cls, "boots": len(errs),
                                             "lowest": round(min(errs), 4), "highest": round(max(errs), 4)})
            for (acc, vllm, cls), errs in sorted(groups.items())]
    rows += graph_rises(records)
    return Measurement(
        id=RECORD_ID, kind="measurement", basis="derived",
        name="kb's vLLM KV-pool estimate against recorded vLLM boots, by model class",
        conditions={"compared": "kb's 'GPU KV cache size' for the boot's own serve line vs the one vLLM logged"},
        rows=rows, sources=[Source(type="probe", ref=f"evidence/{e}") for e in sorted(evidence_ids)],
        notes="Written by `kb probe boot-error --write` (kbtool/probe/boot_error.py); kv_cache_tokens_error rows: the "
              "largest error in absolute terms, lowest/highest signed (prediction / vLLM - 1); "
              f"{RISE} rows: how much higher the V2 runner's profile peak was with CUDA graphs than eager on the same "
              "model (GiB, the largest), not modelled by kb.",
    )


def write(records: Path, image: Any, models: Path = MODELS) -> tuple[Path, Measurement]:
    """Write (or rewrite: it is derived, not evidence) records/measurements/<RECORD_ID>.yaml."""
    from kbtool.fmt.core import canonical
    from kbtool.store.writer import atomic_write, dump, file_lock

    rec = record(image, models, records)
    path = records / "measurements" / f"{RECORD_ID}.yaml"
    data: dict[str, Any] = rec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    text = canonical(dump({"id": data.pop("id"), "kind": "measurement", **data}), path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path):
        atomic_write(path, text)
    return path, rec
