"""The memory block of an answer: the vLLM budget (kbtool/solve/engines/vllm/budget.py) for the model on this GPU."""

from __future__ import annotations

from kbtool.errors import KbError
from kbtool.solve.conditions import compare_versions
from kbtool.solve.engines.results import Pool
from kbtool.solve.engines.vllm import defaults as vd
from kbtool.solve.engines.vllm import mmprefix
from kbtool.solve.engines.vllm.budget import fit
from kbtool.solve.engines.vllm.planning import planning
from kbtool.solve.engines.vllm.pool import accounting
from kbtool.solve.engines.vllm.records import lines, measured
from kbtool.solve.parts import Memory
from kbtool.solve.weights import Fit, fp32_loaded_as

V1_RUNNER_GONE = "0.34.0"  # the first release without the V1 model runner (records/engine-releases/vllm-0.34.0.yaml)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.context import Ctx
    from kbtool.solve.engines.vllm.pool import Report
    from kbtool.solve.image import AcceleratorV


LOW_DTYPES = ("bf16", "fp16", "fp32")  # what fp8 would halve (KV) or shrink (weights)


def memory_for(cx: Ctx, acc: AcceleratorV, env: dict[str, Any], assumed: dict[str, Any],
               release: str | None) -> Memory | None:
    """Memory for the model on this accelerator, sized by `release`'s accounting (None: the release its boots
    measured); None when there is no model or no capacity (a note says why)."""
    q, model = cx.q, cx.model
    if model is None:
        return None
    capacity = acc.capacity_bytes()
    if capacity is None:
        cx.notes.append(f"{acc.id} has no memory capacity recorded; the KV fit is not computed")
        return None
    settings = q.settings if q.engine == "vllm" else {}
    kv = env["kv_dtype"]
    batch = q.batch or 1
    if q.batch is None:
        assumed["batch"] = 1
    ctx = q.ctx
    if ctx is None and model.max_context:
        ctx = model.max_context
        assumed["ctx"] = f"{ctx} (the model's max context, for the memory check only)"
    d = serve_defaults(cx, acc, release, ctx)
    rows = lines(vd.rows(cx.img))
    acct, plan = accounting(release, rows), planning(release, rows)
    tokens = q.batched_tokens or d.max_num_batched_tokens
    seqs = settings.get("max_num_seqs") or d.max_num_seqs
    utilization = q.utilization if q.utilization_given else d.utilization
    assumed.update(assumed_defaults(cx, acc, d, q.batched_tokens is None, not settings.get("max_num_seqs"),
                                    not q.utilization_given))
    notes_in: list[str] = []
    # vLLM's --dtype auto downcasts a float32 checkpoint to the platform's first dtype, bf16 from sm80 on
    # (vllm/config/model.py:2440 _resolve_auto_dtype, "Downcast for float32 models", and platforms/cuda.py:257
    # supported_dtypes, 0.33.0 commit 4ba787ec9; the same in every release kb records)
    auto = "fp16" if env.get("vendor") == "nvidia" and 0 < float(env.get("cc") or 0) < 8.0 else "bf16"
    weights = fp32_loaded_as(model, q.weights, q.dtype, auto)
    if weights != q.weights:
        kv = weights if kv == "fp32" else kv
        notes_in.append(f"{model.weight_dtype} checkpoint: vLLM's --dtype {'float32' if weights == 'fp32' else 'auto'}"
                        f" loads it as {weights} (vllm/config/model.py " + (
                            "_get_and_verify_dtype, 'Upcasting')" if model.weight_dtype != "fp32" else
                            "_resolve_auto_dtype, 'Downcast for float32 models')"))
    eager = bool(settings.get("enforce_eager"))
    # VLLM_USE_V2_MODEL_RUNNER before the command picks the runner where the release still has both (config/vllm.py
    # use_v2_model_runner reads the variable before the model's default: :523 in 0.24.0, :551 in 0.26.0, :747 in
    # 0.33.0); from 0.34.0 the V1 runner is gone (its engine-release record's defaults.model_runner note)
    forced = settings.get("model_runner") if compare_versions(d.release, V1_RUNNER_GONE) < 0 else None
    run = forced or d.runner(model)
    if forced:
        assumed["model runner"] = f"{forced} (VLLM_USE_V2_MODEL_RUNNER={int(forced == 'V2')} in the line)"
    elif settings.get("model_runner"):
        notes_in.append(f"VLLM_USE_V2_MODEL_RUNNER: vLLM {d.release} has only the V2 model runner")
    block = env.get("block_size") if isinstance(env.get("block_size"), int) else None
    reserve = q.reserve
    pp, dp = settings.get("pp") or 1, settings.get("dp") or 1
    kv_memory = settings.get("kv_cache_memory")
    if pp > 1 or dp > 1:
        moe = dp > 1 and bool(getattr(model, "experts", None))
        notes_in.append(f"{q.gpus * pp} GPUs per replica (tp {q.gpus} x pp {pp})"
                        + (f"; {dp} data-parallel replicas, each sized as shown" if dp > 1 and not moe else "")
                        + (f"; {dp} data-parallel replicas, each sized as shown but for the MoE experts, which vLLM "
                           f"shards over all {q.gpus * dp} GPUs of the replicas (model_executor/layers/fused_moe/"
                           "config.py flatten_tp_across_dp_and_pcp)" if moe else ""))

    # an MTP speculative draft the release's record covers (spec.py); any other draft leaves the answer conditional
    # (Vllm.unmodelled_memory names it)
    from kbtool.solve.engines.vllm import spec as vllm_spec

    mtp = vllm_spec.draft(settings, model, d.release, rows)[0]
    if mtp is not None:
        assumed["speculative decoding"] = vllm_spec.words(mtp)

    towers_off = mmprefix.towers_off(model, settings)
    if getattr(model, "encoders", None):  # the weights' encoders on the assumed: line (kbtool/model/encoder.py)
        from kbtool.solve.weights import tower_bytes

        gb = tower_bytes(model, weights)[0] / 1e9
        assumed["vision tower"] = (f"{gb:,.2f} GB left out of the weights: {towers_off}" if towers_off else
                                   f"{gb:,.2f} GB in the weights (vLLM loads it)")

    def on(tp: int, *, kv_as: str | None = None, weights_as: str | None = None, ctx_as: int | None = None,
           batch_as: int | None = None, seqs_as: int | None = None) -> Fit:
        return fit(model, kv_as or kv, capacity, ctx_as or ctx, batch=batch_as or batch, tp=tp,
                   utilization=utilization, weights=weights_as or weights, reserve=reserve, batched_tokens=tokens,
                   max_num_seqs=seqs_as or seqs, eager=eager, block_size=block, pp=pp, release=release,
                   kv_cache_memory=kv_memory, formats=cx.img.kv_formats, sm=env.get("sm"),
                   margins=d.margins if d.extensible_kv_cache and not kv_memory else None, run=run,
                   text_only=towers_off, acct=acct, plan=plan, prefix_caching=settings.get("prefix_caching"),
                   rows=rows, mm_settings=settings, dp=dp, graphs_mode=None if eager else d.cudagraph_mode,
                   engine_named=release is not None, draft=mtp)

    f = on(q.gpus)
    if settings.get("ctx_auto") and f.fits is False and f.max_ctx > 0 and f.ctx_limit == "memory":
        # --max-model-len auto: vLLM lowers the context to what one request's KV fits (kv_cache_utils.py
        # _auto_fit_max_model_len), instead of refusing to start
        notes_in.append(f"--max-model-len auto: vLLM fits the context to memory: {f.max_ctx:,} tokens "
                        f"(the model allows {ctx:,})")
        ctx = f.max_ctx
        assumed["ctx"] = f"{ctx} (--max-model-len auto: vLLM fits the context to memory)"
        f = on(q.gpus)
    # the fewest GPUs that fit, by the same budget: MLA's latent does not shard, weights do
    more = _fewest_gpus(on, q.gpus) if f.fits is False else None
    to_fit = _to_fit(f, on, q.gpus, kv, ctx, batch, more) if f.fits is False else []
    cap_note = "driver-reported bytes" if acc.driver_memory else "marketed GB x 1e9 (no driver figure recorded)"
    notes = [*notes_in, *f.notes, f"capacity: {cap_note}"]
    mem = Memory(fits=f.fits, kv_bytes=f.kv_bytes, kv_bytes_per_token=f.kv_bytes_per_token,
                 weights_bytes=f.weights_bytes, available_bytes=f.pool_bytes, capacity_bytes=f.capacity_bytes,
                 max_ctx=f.max_ctx, formula=f.formula, notes=notes, weights_dtype=f.weights_dtype,
                 reserve_bytes=f.reserve_bytes, pool_tokens=f.pool_tokens, max_sequences=f.max_sequences,
                 max_ctx_memory=f.max_ctx_memory, ctx_limit=f.ctx_limit, utilization=utilization,
                 gpus_to_fit=more[0] if more else None, to_fit=to_fit,
                 engine_report=_held_to_boots(cx, acc, _report(f.engine_report, acct.release), {
                     "max_model_len": ctx, "kv_cache_dtype": _vllm_kv(kv, env), "enforce_eager": eager,
                     "gpu_memory_utilization": utilization, "max_num_batched_tokens": tokens,
                     "max_num_seqs": seqs, "tp": q.gpus, "pp": pp, "model_runner": forced,
                     "dtype": "fp32" if weights == "fp32" else None, "text_only": True if towers_off else None,
                     "speculative": f"mtp:{mtp.tokens}" if mtp is not None else None,
                     "prefix_caching": settings.get("prefix_caching")}, release, kv_memory))
    r = mem.engine_report
    if r is not None and not eager and r.get("basis") != "measured" and run == "V2":
        _graph_rise(cx, acc, r)
    if r is not None:
        if q.ctx:  # the words the answer shows (at the asked ctx only)
            r["text"] = report_text(r, q.ctx)
        # vLLM's start-up check, replayed as its release plans the pool (vllm_planning.check: the per-group block
        # counts, the null block, its exact error text)
        # (without --ctx the pool is checked at the model's context, which the answer does not claim vLLM refuses;
        # the check of a Mamba model's state blocks against max_num_seqs hardly depends on the context: it stands)
        starts = bool(r["starts"]) if q.ctx or r.get("refused_by") == "state_blocks" else None
        edge = _edge(f.engine_report, r, bool(q.ctx), release is not None) if starts is not None else None
        if edge is not None:
            r["edge"] = edge
        mem.pool = Pool(engine="vllm", label=f"vLLM {r.get('accounting')}", release=r.get("accounting"),
                        tokens=r["kv_cache_tokens"], concurrency=r["max_concurrency"], starts=starts,
                        error=r.get("startup_error") if starts is False else None,
                        basis=r.get("basis", "estimated"), report=r, edge=edge)
    return mem


def serve_defaults(cx: Ctx, acc: AcceleratorV, release: str | None, ctx: int | None) -> vd.Defaults:
    """`vllm serve`'s defaults on this GPU for `release` (None: the release whose accounting sizes the pool, the
    record whose `accounting.measured` is true), from its engine-release record (vllm/defaults.py)."""
    rows = vd.rows(cx.img)
    if not rows:
        raise KbError("no engine-release record of vLLM: records/engine-releases/vllm-*.yaml is missing",
                      fix="restore records/engine-releases (the vllm-engine-config probe's data)")
    memory, name, cc = vd.accelerator_facts(cx.img, acc.id)
    arch = getattr(cx.model, "architecture", None)
    seqs = cx.q.settings.get("max_num_seqs") if cx.q.engine == "vllm" else None
    d = vd.serve_defaults(cx.img, release or measured(lines(rows)), memory or acc.capacity_bytes() or 0, name,
                          cc or "0.0", ctx, arch, seqs)
    if d is None:
        raise KbError("no engine-release record of vLLM: records/engine-releases/vllm-*.yaml is missing",
                      fix="restore records/engine-releases (the vllm-engine-config probe's data)")
    return d


def assumed_defaults(cx: Ctx, acc: AcceleratorV, d: vd.Defaults, tokens: bool, seqs: bool,
                     util: bool) -> dict[str, str]:
    """The `assumed:` lines for the defaults kb took from the release (only those the user did not give)."""
    memory, name, _cc = vd.accelerator_facts(cx.img, acc.id)
    of = f"vLLM {d.release}" + (f", nearest recorded to {d.asked}" if d.borrowed else "")
    out = {}
    where = f"on {vd.gib(memory or 0)} {name}"  # what vLLM's batch defaults read
    if tokens and seqs:
        out["max_num_batched_tokens"] = (f"{d.max_num_batched_tokens}, max_num_seqs {d.max_num_seqs} ({of}, {where}, "
                                         f"{_short(d.batch_source)})")
    elif tokens:
        out["max_num_batched_tokens"] = f"{d.max_num_batched_tokens} ({of}, {where}, {_short(d.batch_source)})"
    elif seqs:
        out["max_num_seqs"] = f"{d.max_num_seqs} ({of}, {where}, {_short(d.batch_source)})"
    if util:
        out["gpu_memory_utilization"] = f"{d.utilization:g} ({of}, {_short(d.sources['gpu_memory_utilization'])})"
    return out


def _short(locator: str) -> str:
    """'vllm-project/vllm@4ba787ec vllm/engine/arg_utils.py:2940' -> 'engine/arg_utils.py:2940'."""
    return locator.split(" ")[-1].removeprefix("vllm/")


def report_text(r: dict[str, Any], ctx: int) -> str:
    """The two numbers vLLM prints at start-up, in its words, and how far to trust them: measured (a recorded boot
    asked this question), or estimated with the error kb showed on recorded boots of the model's class."""
    pad = f"; {r['padding'][0]}" if r.get("padding") else ""
    st = r.get("mamba_state")
    if st:
        pages = f"{st['pages_per_request']} state page{'s' if st['pages_per_request'] != 1 else ''} per request"
        pad += (f"; Mamba state mode {st['mode']} (prefix caching on for hybrids): {pages}" if st["mode"] == "align"
                else f"; Mamba state mode {st['mode']}: {pages}")
    for g in r.get("groups") or []:  # one group of layers whose pages differ (a sparse-MLA model's indexer)
        if g.get("pages"):
            parts = " + ".join(f"{x['layers']} {x['cache']} pages of {x['page_bytes']:,} B" for x in g["pages"])
            pad += f"; one KV cache group of {g['layers']} layers: {parts} = {g['block_bytes']:,} B a block"
    head = (f"vLLM will report: GPU KV cache size {r['kv_cache_tokens']:,} tokens; maximum concurrency for "
            f"{ctx:,} tokens per request {r['max_concurrency']:.2f}x")
    if r.get("starts") is False and not r["kv_cache_tokens"]:
        head = "vLLM refuses to start: no memory is left for the KV cache"
    elif r.get("starts") is False:  # it raises before it logs them
        head = (f"vLLM would size {r['kv_cache_tokens']:,} tokens, {r['max_concurrency']:.2f}x of one {ctx:,}-token "
                f"request ({r.get('blocks_per_request', 0):,} blocks each), and refuses to start")
    if r.get("basis") == "measured":
        m = r["measured"]
        return f"{head} (measured: vLLM {m['vllm']} booted this on {m['accelerator']}, {m['row']}{pad})"
    acct, rel = r["accounting"], r.get("release")
    why = (f"estimated from vLLM {acct}'s accounting{pad}" if not rel or rel == acct else
           f"estimated: vLLM {rel}'s defaults, runner and planning, the reserve as vLLM {acct}'s line sizes it{pad}")
    other = r.get("other_release")
    if other:
        why += (f"; vLLM {other['vllm']} booted the same line on this GPU: {other['kv_cache_tokens']:,} tokens, "
                f"{other['max_concurrency']:.2f}x ({other['row']})")
    err = r.get("error")
    if err:
        n = int(err["boots"])
        why += (f"; kb was {err['lowest']:+.1%} to {err['highest']:+.1%} off vLLM {err['vllm']} on {n} boot"
                f"{'s' if n != 1 else ''} of {err['class']} models on {err['accelerator']}")
    else:
        cls = f" of {r['class']} models" if r.get("class") else ""
        why += f"; no boot of vLLM {r.get('release') or r.get('accounting')}{cls} recorded: estimated"
    g = r.get("graph_rise")
    if g:  # the V2 runner's compiled profile forward (memory._graph_rise)
        why += ("; the compiled profile peak with CUDA graphs is not modelled: " +
                (f"{g['lowest']:+.2f} to {g['highest']:+.2f} GiB over eager on {g['boots']} vLLM {g['vllm']} boot"
                 f"{'s' if g['boots'] != 1 else ''}" if g.get("boots") else f"no graphs boot of vLLM {g['vllm']}"))
    return f"{head} ({why})"


def _vllm_kv(kv: str, env: dict[str, Any]) -> str:
    """kb's KV dtype as vLLM's --kv-cache-dtype names it (auto: the model dtype; fp8 is e4m3 on CUDA)."""
    return "auto" if kv == env.get("dtype") else {"fp8_e4m3": "fp8"}.get(kv, kv)


def _held_to_boots(cx: Ctx, acc: AcceleratorV, report: dict[str, Any] | None, flags: dict[str, Any],
                   release: str | None, kv_memory: int | None) -> dict[str, Any] | None:
    """The report with what the recorded vLLM boots say of it (kbtool/solve/engines/vllm/boots.py): vLLM's own numbers
    where
    a boot asked this question on this release ("measured"), else kb's estimate with its class's error."""
    from kbtool.solve.engines.vllm import boots

    if report is None or cx.model is None:
        return report
    release = release or cx.q.libs.get("vllm")
    if kv_memory:
        return report  # --kv-cache-memory-bytes: no recorded boot was sized so
    report["class"] = cls = boots.model_class(cx.model)
    tp, pp = int(flags.get("tp") or 1), int(flags.get("pp") or 1)
    if tp > 1 or pp > 1:  # every recorded boot ran on one GPU: their error band is not this question's
        report["class"] = cls = (f"tensor-parallel {tp} " if tp > 1 else "") + (
            f"pipeline-parallel {pp} " if pp > 1 else "") + cls
    report["estimate"] = {"kv_cache_tokens": report["kv_cache_tokens"], "max_concurrency": report["max_concurrency"]}
    rows = boots.matches(cx.img, acc.id, cx.model, flags)
    same = [r for r in rows if r[1].get("vllm") == release]
    if same:
        _acc, c, tokens, concurrency, row_id = same[-1]
        report.update(kv_cache_tokens=tokens, max_concurrency=round(concurrency, 2), basis="measured",
                      measured={"row": row_id, "vllm": release, "accelerator": acc.id})
        return report
    if rows:
        _acc, c, tokens, concurrency, row_id = rows[-1]
        report["other_release"] = {"row": row_id, "vllm": c.get("vllm"), "kv_cache_tokens": tokens,
                                   "max_concurrency": round(concurrency, 2)}
    report["release"] = release = release or report.get("accounting")
    err = boots.class_error(cx.img, acc.id, release, cls)
    if err:
        report["error"] = err
    return report


EDGE_UNBOOTED = 0.02
"""Where no boot of the release measures kb's error for the model's class, a start-up check whose kb count lies
within this fraction of its boundary is too close to call (the bar kb's estimates are held to on booted releases)."""


def _edge(report: Report | None, r: dict[str, Any], ctx_asked: bool, engine_named: bool) -> dict[str, Any] | None:
    """Where kb's estimated count lies within its own measured error of a start-up check's boundary: kb's pool was
    `lowest` to `highest` off vLLM's on the release's boots of this class (report["error"]), so vLLM's own count is
    kb's / (1 + e) for some e in that band, and the check may go either way when 1 + lowest <= kb's ratio to the
    boundary <= 1 + highest. The checks: one request of max_model_len against the pool (blocks per request), and a
    Mamba model's state blocks against max_num_seqs under full CUDA graphs (the latter refuses only where the answer
    names vLLM). None where the report is vLLM's own (a boot of this line), or no check is near."""
    if report is None or r.get("basis") != "estimated":
        return None
    err = r.get("error")
    lo, hi = (float(err["lowest"]), float(err["highest"])) if err else (-EDGE_UNBOOTED, EDGE_UNBOOTED)
    band = {"lowest": lo, "highest": hi, **({"boots": err.get("boots"), "vllm": err.get("vllm"),
                                            "accelerator": err.get("accelerator"), "class": err.get("class")}
                                           if err else {"vllm": r.get("release"), "boots": 0})}
    near: list[tuple[str, int, int]] = []
    if ctx_asked and report.per_request:
        near.append(("max_model_len", report.num_blocks, report.per_request))
    if report.state_check is not None and engine_named:
        near.append(("max_num_seqs", *report.state_check))
    if any(count / boundary < 1 + lo for _c, count, boundary in near):  # fails whatever kb's error: the refusal stands
        return None
    return next(({"check": check, "count": count, "boundary": boundary, "ratio": round(count / boundary, 4),
                  "band": band} for check, count, boundary in near if count / boundary <= 1 + hi), None)


def _graph_rise(cx: Ctx, acc: AcceleratorV, r: dict[str, Any]) -> None:
    """With CUDA graphs the V2 runner's profile forward is the first call of the torch.compile'd model, whose peak kb
    does not model (pool.v2_activation_bytes sizes the eager ops): the report says so, with how much higher that peak
    was than eager on the release's recorded boots (boots.graph_rise), or that none was recorded."""
    from kbtool.solve.engines.vllm import boots

    rel = r.get("release") or r.get("accounting")
    got = boots.graph_rise(cx.img, acc.id, rel)
    r["graph_rise"] = {"vllm": rel, **({k: got[k] for k in ("accelerator", "boots", "lowest", "highest")} if got
                                       else {})}


def _fewest_gpus(on: Any, gpus: int, **change: Any) -> tuple[int, Fit] | None:
    """The fewest GPUs (doubling from `gpus`, up to 64) at which it fits with `change`, and that fit."""
    p = 2 * gpus
    while p <= 64:
        g = on(p, **change)
        if g.fits:
            return p, g
        p *= 2
    return None


def _to_fit(f: Fit, on: Any, gpus: int, kv: str, ctx: int | None, batch: int,
            more: tuple[int, Fit] | None) -> list[dict[str, Any]]:
    """The changes that make it fit, each sized again with the same budget before it is offered (one change
    alone first; fp8 weights and fp8 KV together only where neither fits alone; more GPUs with fp8 KV only where
    more GPUs alone do not): [{"change": "--kv fp8", "max_sequences": 4, "max_ctx": 131072}, ...]."""
    low_kv, low_weights = kv in LOW_DTYPES, f.weights_dtype in LOW_DTYPES
    tries: list[tuple[str, dict[str, Any]]] = []
    r = f.engine_report
    if r is not None and r.state_blocks:
        # the fix vLLM's own message names: max_num_seqs down to the Mamba state blocks
        tries.append((f"--max-num-seqs {r.state_blocks} (a vLLM flag: --vllm-args)", {"seqs_as": r.state_blocks}))
    if f.ctx_limit == "memory" and f.max_ctx and ctx and f.max_ctx < ctx:
        tries.append((f"--ctx {f.max_ctx}", {"ctx_as": f.max_ctx}))
    if batch > 1 and f.max_sequences:
        tries.append((f"--batch {f.max_sequences}", {"batch_as": f.max_sequences}))
    if low_kv:
        tries.append(("--kv fp8", {"kv_as": "fp8_e4m3"}))
    if low_weights:
        tries.append(("--weights fp8", {"weights_as": "fp8"}))
    if low_kv and low_weights:
        tries.append(("--weights fp8 --kv fp8", {"kv_as": "fp8_e4m3", "weights_as": "fp8"}))
    out: list[dict[str, Any]] = []
    for change, kw in tries:
        if change == "--weights fp8 --kv fp8" and any(o["change"] in ("--kv fp8", "--weights fp8") for o in out):
            continue  # together only where neither fits alone
        g = on(gpus, **kw)
        if g.fits:
            out.append(_offer(change, g))
    if more is None and low_kv:
        got = _fewest_gpus(on, gpus, kv_as="fp8_e4m3")
        if got:
            out.append(_offer(f"--gpus {got[0]} --kv fp8", got[1]))
    elif more is not None:
        out.append(_offer(f"--gpus {more[0]}", more[1]))
    return out


def _offer(change: str, g: Fit) -> dict[str, Any]:
    return {"change": change, "max_sequences": g.max_sequences, "max_ctx": g.max_ctx}


def _report(r: Report | None, accounting: str) -> dict[str, Any] | None:
    """The engine report of `r`; `accounting`: the release whose accounting line sized the reserve."""
    if r is None:
        return None
    return {"kv_cache_tokens": r.tokens, "max_concurrency": round(r.concurrency, 2), "num_blocks": r.num_blocks,
            "block_size": r.block_size, "groups": [{"type": g.kind, "layers": g.layers, "page_bytes": g.page_bytes,
                                                    **({"window": g.window} if g.window else {}),
                                                    **({"pages": [{"cache": w, "page_bytes": p, "layers": n}
                                                                  for p, n, w in g.pages],
                                                        "block_bytes": g.block_bytes(g.layers)} if g.pages else {})}
                                                   for g in r.groups],
            "padding": list(r.padding), "basis": "estimated", "accounting": accounting,
            "planning": r.planning, "starts": r.starts, "startup_error": r.error, "blocks_per_request": r.per_request,
            **({"refused_by": "state_blocks"} if r.state_blocks else {}),
            **({"warning": f"vLLM {r.planning} at its defaults stops at start-up: {r.warning}"} if r.warning else {}),
            **({"mamba_state": {"mode": r.state[0], "pages_per_request": r.state[1]}} if r.state else {})}

