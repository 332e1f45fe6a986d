"""Issue 44's held-out judge on public boot logs: every entry of tests/data/boot-logs/vllm.yaml (a vLLM start-up log
from a public GitHub thread, each with its address) is asked of kb as its log shows it, and kb's "vLLM will report"
(memory.engine_report: GPU KV cache size, maximum concurrency, start/refuse) and its KV pool (memory.available_bytes)
are compared with what vLLM printed. A second check starts from the KV memory vLLM itself logged and asks kb's model
of vLLM's KV manager for the tokens (this separates kb's non-KV memory from its KV planning).

Asked per log: `build_query(gpu=..., vllm_args="serve <kb model> <args as logged>", vllm=<release>)` where the
release is the logged one if kb records it, else the nearest recorded release (older logs: kb's oldest), else (no
release in the log) kb's default; the table says which. A log kb cannot be asked (no GPU named, no command shown,
no model record, mixed GPUs) is listed as unanswered with the reason, never dropped. The floors are today's rates:
raise them as kb gets closer, never lower them."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from tests.util import DATA, ROOT

LOGS = DATA / "boot-logs" / "vllm.yaml"
GIB = 1 << 30
# measured on this set (33 logs, 20 asked; 22 and 11 before the logs of recorded releases were added, 19 and 7 when
# built): raise these as kb answers better, never lower them
# within_2pct 1 -> 0 (branch issue-44-publogs-graph-carry, accepted): the one floor lowered, because the one hit was an
# accident of two errors that cancelled:
# club-3090#642 (+0.7%) was within 2% only because 0.24.0's flat 1 GiB graph term offset the encoder pass kb did not
# size for Qwen3.6-27B; with both as vLLM's code has them it is +4.0% (README of tests/data/boot-logs)
# within_2pct 0 -> 1 (branch h20): vllm#40691 (H20-3e) went from +3.0% to +1.3% once nvidia-h20-141gb's memory_bytes
# became torch's recorded total for the H20-3e (150,109,880,320 B) instead of 141 x 2^30
FLOOR = {"answered": 20, "numbers": 10, "within_2pct": 1, "within_5pct": 3, "start_right": 14, "kv_manager_2pct": 8,
         "weights_2pct": 5}
KEYS = {"url", "vllm", "gpu", "gpus", "model", "kb_model", "weights", "args", "logged", "note"}
LOGGED = {"weights_gib", "available_kv_gib", "kv_cache_tokens", "max_concurrency", "max_model_len", "starts",
          "num_gpu_blocks", "needed_kv_gib", "estimated_max_model_len", "max_tokens_in_kv"}


def entries() -> list[dict[str, Any]]:
    return list(yaml.safe_load(LOGS.read_text(encoding="utf-8")))


def recorded_releases() -> list[str]:
    return sorted((p.stem.removeprefix("vllm-") for p in (ROOT / "records" / "engine-releases").glob("vllm-*.yaml")),
                  key=_key)


def _key(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit()) or "0"
        out.append(int(digits[:3]) if part[:1].isdigit() else 0)
    return tuple(out)


def release_for(logged: str | None) -> tuple[str | None, str]:
    """(the release kb is asked for, how it was chosen): the logged one if recorded, else the nearest recorded."""
    if logged is None:
        return None, "kb default (not logged)"
    rel = recorded_releases()
    if logged in rel:
        return logged, "as logged"
    want = _key(logged)
    near = min(rel, key=lambda r: (abs(_key(r)[0] - want[0]) * 10_000 + abs(_key(r)[1] - want[1]) * 100
                                   + abs(_key(r)[2] - want[2])))
    return near, f"nearest recorded to {logged}"


def why_unasked(e: dict[str, Any]) -> str | None:
    if e["kb_model"] is None:
        return "no kb model record"
    if e["gpu"] is None:
        return "GPU not named (or mixed GPUs)"
    if e["args"] is None:
        return "command not shown"
    return None


def ask(e: dict[str, Any]) -> dict[str, Any]:
    from kbtool.errors import UsageError
    from kbtool.query_cli import image
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    release, how = release_for(e["vllm"])
    try:
        q = build_query(gpu=e["gpu"], vllm_args=f"serve {e['kb_model']} {e['args']}", vllm=release,
                        weights=e["weights"])
        answer = solve(image(), q)
    except UsageError as err:
        return {"release": release, "how": how, "error": str(err)}
    m = answer.memory
    r = (m.engine_report or {}) if m is not None else {}
    est = r.get("estimate") or r  # kb's own figures, not a recorded boot's
    return {"release": release, "how": how, "error": None, "verdict": answer.verdict,
            "fits": m.fits if m is not None else None, "starts": r.get("starts", m.fits if m is not None else None),
            "kv_cache_tokens": est.get("kv_cache_tokens"), "max_concurrency": est.get("max_concurrency"),
            "available_kv_gib": (m.available_bytes / GIB) if m is not None else None,
            "weights_gib": (m.weights_bytes / GIB) if m is not None else None}


def err(kb: float | None, logged: float | None) -> float | None:
    if kb is None or logged is None or logged <= 0:
        return None
    return kb / logged - 1


def kv_manager(e: dict[str, Any]) -> float | None:
    """kb's KV manager from the KV memory vLLM logged: the error of its token count (None where not checkable), with
    the asked release's planning and the hybrid state mode the logged flags give (planning.state_mode)."""
    from kbtool.query_cli import image
    from kbtool.solve.engines.vllm import pool as vllm_pool
    from kbtool.solve.engines.vllm import records, spec
    from kbtool.solve.engines.vllm.args import parse
    from kbtool.solve.engines.vllm.planning import Point, planning, state_mode

    lg = e["logged"]
    if e["kb_model"] is None or not lg.get("available_kv_gib") or not lg.get("kv_cache_tokens"):
        return None
    model = image().model(e["kb_model"])
    args = str(e["args"] or "")
    kv = "fp8_e4m3" if "--kv-cache-dtype fp8" in args else "bf16"
    tp = e["gpus"] or 1
    # an MTP draft the release's record covers (its attention layers in the groups, its state pages per request)
    release = release_for(e["vllm"])[0]
    settings = {"speculative": spec.read(parse(f"serve {e['kb_model']} {args}", release).speculative_config)}
    draft = spec.draft(settings, model, release, records.recorded())[0]
    grouped = vllm_pool.groups(model, kv, 16, tp=tp, draft_layers=draft.layers if draft else 0)
    if grouped is None:
        return None
    ctx = lg.get("max_model_len") or 32768
    plan = planning(release)
    prefix = True if "--enable-prefix-caching" in args else False if "--no-enable-prefix-caching" in args else None
    mode, ckpt = state_mode(plan, model.architecture, None, any(g.type == "linear" for g in model.layers), prefix)
    r = vllm_pool.report(round(lg["available_kv_gib"] * GIB), grouped, grouped.block,
                         Point(ctx, 8192, mamba_mode=mode, checkpoint_blocks=ckpt,
                               draft_blocks=draft.tokens if draft and draft.state_blocks else 0), plan=plan)
    return r.tokens / lg["kv_cache_tokens"] - 1


def measure() -> dict[str, Any]:
    rows = []
    for e in entries():
        lg = e["logged"]
        row: dict[str, Any] = {"url": e["url"], "vllm": e["vllm"], "model": e["kb_model"] or e["model"],
                               "gpu": e["gpu"], "gpus": e["gpus"], "logged": lg, "unasked": why_unasked(e)}
        if row["unasked"] is None:
            row.update(ask(e))
            row["e_tokens"] = err(row.get("kv_cache_tokens"), lg.get("kv_cache_tokens"))
            row["e_conc"] = err(row.get("max_concurrency"), lg.get("max_concurrency"))
            row["e_avail"] = err(row.get("available_kv_gib"), lg.get("available_kv_gib"))
            row["e_weights"] = err(row.get("weights_gib"), lg.get("weights_gib"))
            if lg.get("starts") is not None and row.get("starts") is not None:
                row["start_right"] = bool(row["starts"]) == bool(lg["starts"])
        row["e_kv_manager"] = kv_manager(e)
        rows.append(row)
    asked = [r for r in rows if r["unasked"] is None and not r.get("error")]
    numbers = [r for r in asked if r.get("e_tokens") is not None or r.get("e_conc") is not None]
    worst = [max(abs(x) for x in (r.get("e_tokens"), r.get("e_conc")) if x is not None) for r in numbers]
    kvm = [r["e_kv_manager"] for r in rows if r.get("e_kv_manager") is not None]
    wts = [r["e_weights"] for r in asked if r.get("e_weights") is not None]
    return {"logs": len(rows), "answered": len(asked), "numbers": len(numbers),
            "within_2pct": sum(w <= 0.02 for w in worst), "within_5pct": sum(w <= 0.05 for w in worst),
            "start_checked": sum("start_right" in r for r in asked),
            "start_right": sum(r.get("start_right") is True for r in asked),
            "kv_manager": len(kvm), "kv_manager_2pct": sum(abs(x) <= 0.02 for x in kvm),
            "weights": len(wts), "weights_2pct": sum(abs(x) <= 0.02 for x in wts), "rows": rows}


def table(m: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 100:+.1f}%"

    def num(x: Any) -> str:
        return "" if x is None else (f"{x:,.2f}" if isinstance(x, float) else f"{x:,}")

    out = [f"{'log':58} {'release':22} {'tokens kb/log':>22} {'err':>7} {'conc kb/log':>15} {'err':>7} "
           f"{'KV GiB kb/log':>15} {'err':>7} {'starts kb/log':>13} {'kvm err':>7} {'weights err':>11}"]
    for r in m["rows"]:
        lg = r["logged"]
        name = r["url"].removeprefix("https://github.com/")
        if r["unasked"] or r.get("error"):
            why = r["unasked"] or f"error: {r['error'].splitlines()[0][:60]}"
            out.append(f"{name:58} unanswered: {why}   kvm {pct(r.get('e_kv_manager'))}")
            continue
        rel = f"{r['release'] or 'default'} ({'logged' if r['how'] == 'as logged' else r['vllm'] or '-'})"
        out.append(f"{name:58} {rel:22} {num(r.get('kv_cache_tokens')) + '/' + num(lg.get('kv_cache_tokens')):>22} "
                   f"{pct(r.get('e_tokens')):>7} "
                   f"{num(r.get('max_concurrency')) + '/' + num(lg.get('max_concurrency')):>15} "
                   f"{pct(r.get('e_conc')):>7} "
                   f"{num(r.get('available_kv_gib')) + '/' + num(lg.get('available_kv_gib')):>15} "
                   f"{pct(r.get('e_avail')):>7} {str(r.get('starts')) + '/' + str(lg.get('starts')):>13} "
                   f"{pct(r.get('e_kv_manager')):>7} {pct(r.get('e_weights')):>11}")
    keys = ("logs", "answered", "numbers", "within_2pct", "within_5pct", "start_checked", "start_right", "kv_manager",
            "kv_manager_2pct", "weights", "weights_2pct")
    out.append(", ".join(f"{k} {m[k]}" for k in keys))
    return "\n".join(out)


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    return measure()


def test_every_log_is_a_public_thread_with_what_it_shows() -> None:
    es = entries()
    assert len(es) >= 15
    for e in es:
        assert set(e) == KEYS, e["url"]
        assert e["url"].startswith("https://github.com/"), e["url"]
        assert set(e["logged"]) <= LOGGED, (e["url"], set(e["logged"]) - LOGGED)
        assert e["logged"].get("starts") in (True, False, None)
        assert e["note"], e["url"]


def test_the_release_asked_is_the_logged_one_or_the_nearest() -> None:
    assert release_for("0.24.0") == ("0.24.0", "as logged")
    assert release_for("0.14.1")[0] == recorded_releases()[0]  # older than any recorded: kb's oldest
    assert release_for("0.33.5")[0] == "0.33.0"
    assert release_for(None) == (None, "kb default (not logged)")


def test_the_rates_do_not_fall(measured: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print("\n" + table(measured))
    got = {k: measured[k] for k in FLOOR}
    assert all(got[k] >= v for k, v in FLOOR.items()), (got, FLOOR)


if __name__ == "__main__":  # python -m tests.solve.test_boot_logs: the table alone
    print(table(measure()))
