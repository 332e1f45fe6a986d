"""Which attention backend vLLM would select, and why each other one is refused (design.md §4, issue 18).

vLLM (vllm/platforms/cuda.py) walks one priority list, chosen by compute capability and MLA, and takes the
first backend whose `validate_configuration` returns no reasons. Here each backend's checks are its
engine-backend claims (records/claims/vllm-*), evaluated for one release (`--vllm`), and the lists are
engine-priority records. An explicit `--attention-backend X` is taken as is when valid, else refused with
X's reasons, as vLLM does.
"""

from __future__ import annotations

from kbtool.names import architecture_of
from kbtool.solve.conditions import compare_versions, evaluate, version_key
from kbtool.solve.engines.vllm.grid import recorded, select_unrecorded
from kbtool.solve.engines.vllm.selected import BackendCheck, Selection, versions
from kbtool.solve.gates import Judge, apply_claims, structural

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.image import BackendV, Image
    from kbtool.solve.parts import Reason

# vLLM's --kv-cache-dtype strings -> the KB's kv_dtype ("auto" is the model dtype)
KV_OF_VLLM = {"float16": "fp16", "bfloat16": "bf16", "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3",
              "fp8_e5m2": "fp8_e5m2", "nvfp4": "nvfp4", "fp8_ds_mla": "fp8_ds_mla"}
DTYPE_OF_VLLM = {"bfloat16": "bf16", "float16": "fp16", "bf16": "bf16", "fp16": "fp16", "float32": "fp32"}


UNBOUND_OK = frozenset({"block_size", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank",
                        "num_heads", "causal"})
_SEV = {"ok": 0, "caveat": 1, "unknown": 2, "rejected": 3}


def _status_of(r: Reason) -> str:
    return "unknown" if r.depends_on else "rejected"


def default_version(img: Image) -> str | None:
    vs = versions(img)
    return vs[-1] if vs else None


def _in_range(version: str, scope: list[tuple[str, str | None, str | None, str | None]]) -> bool:
    for _lib, introduced, fixed, last in scope:
        if introduced and compare_versions(version, introduced) < 0:
            continue
        if fixed and compare_versions(version, fixed) >= 0:
            continue
        if last and compare_versions(version, last) > 0:
            continue
        return True
    return False


def priority_order(img: Image, env: dict[str, Any], version: str, platform: str = "cuda") -> list[str]:
    """The backend ids of the first list whose `when` holds, in the release's priority record."""
    for _id, _engine, plat, scope, lists in img.priorities("vllm"):
        if plat != platform or not _in_range(version, scope):
            continue
        for when, order in lists:
            if evaluate(when, env) is True:
                return list(order)
    return []


def check(img: Image, b: BackendV, env: dict[str, Any], version: str) -> BackendCheck:
    """One backend's own checks (its claims inside the release's scope) in one environment."""
    libs = {"vllm": version}
    out = apply_claims(img.claims(b.id), Judge(env, libs), "engine")
    lay = env.get("attention")
    # vLLM picks the block size itself when --block-size is not given, and skips the checks that read the
    # model's shape when it has no model config: such gates do not bind while their variables are unknown
    reasons = [r for r in out.reasons if not (r.depends_on and set(r.depends_on) <= UNBOUND_OK)]
    status = "ok" if not reasons else max((_status_of(r) for r in reasons), key=_SEV.__getitem__)
    if lay is not None and b.attention and lay not in b.attention:
        status = "rejected"
        reasons.insert(0, structural("ATTENTION", _layout_reason(lay, list(b.attention)), "engine", observed=lay,
                                     allowed=list(b.attention), subject=b.id))
    return BackendCheck(b.id, b.backend_name, status, reasons)


def _layout_reason(lay: str, served: list[str]) -> str:
    """vLLM's own words for a layout mismatch (validate_configuration, vllm/v1/attention/backend.py:314-325)."""
    mla_backend = bool(set(served) & {"mla", "sparse-mla"})
    if (lay in ("mla", "sparse-mla")) != mla_backend:
        return "MLA not supported" if lay in ("mla", "sparse-mla") else "non-MLA not supported"
    return "sparse not supported" if lay == "sparse-mla" else "non-sparse not supported"


def platform_of(env: dict[str, Any]) -> str:
    """vLLM's platform for the accelerator: its ROCm lists on AMD GPUs, its CUDA lists otherwise."""
    return "rocm" if env.get("vendor") == "amd" else "cuda"


def select(img: Image, env: dict[str, Any], version: str | None = None, requested: str | None = None,
           platform: str | None = None) -> Selection:
    """vLLM's choice in `env` (a query environment: cc, dtype, kv_dtype, head_dim, attention, ...)."""
    platform = platform or platform_of(env)
    version = version or default_version(img)
    if version is None:
        return Selection(None, [], {}, None, requested, "the KB has no vLLM priority records")
    env = dict(env, engine="vllm", vllm=version)
    if "mm_prefix" in env and env["mm_prefix"] is not False and (
            version in versions(img) or version in recorded()):  # else: the releases around it, below
        return _select_mm_prefix(img, env, version, requested, platform)
    if version not in versions(img):  # no priority records: the release's own grid, or the releases around it
        return select_unrecorded(img, env, version, requested, platform,
                                 lambda v: select(img, env, v, requested, platform))
    backends = {b.id: b for b in img.backends("vllm")}
    by_name = {b.backend_name.upper(): b.id for b in backends.values()}
    order = priority_order(img, env, version, platform)
    checks = {bid: check(img, backends[bid], env, version) for bid in order if bid in backends}
    if requested:
        rid = by_name.get(requested.upper(), requested if requested in backends else None)
        if rid is None:
            return Selection(version, order, checks, None, requested,
                             f"unknown attention backend {requested!r}")
        c = checks.get(rid) or check(img, backends[rid], env, version)
        checks[rid] = c
        if c.valid:
            return Selection(version, order, checks, rid, requested)
        msgs = [r.message for r in c.reasons] or [f"{c.name} is {c.status} here"]
        return Selection(version, order, checks, None, requested,
                         f"Selected backend AttentionBackendEnum.{c.name} is not valid for this configuration. "
                         f"Reason: {msgs}")
    chosen = next((bid for bid in order if bid in checks and checks[bid].valid), None)
    error = None
    if chosen is None:
        if any(checks[b].status == "unknown" for b in checks):
            error = "depends on inputs not given"
        else:
            error = f"No valid attention backend found for {platform}"
    return Selection(version, order, checks, chosen, None, error)


def _select_mm_prefix(img: Image, env: dict[str, Any], version: str, requested: str | None,
                      platform: str) -> Selection:
    """A multimodal prefix-LM model (use_mm_prefix True, mmprefix.py): no claim reads the prefix mask, so the
    answer is the release's recorded grid point at use_mm_prefix True; where the release's grid does not ask it,
    the choice depends on it (conditional), with the sweep that records it."""
    from kbtool.solve.engines.vllm.grid import from_grid, has_mm_axis

    if env["mm_prefix"] is None:  # a release before every one whose is_mm_prefix_lm list kb read
        return Selection(version, [], {}, None, requested,
                         f"depends on use_mm_prefix, which kb cannot tell for vLLM {version} (its is_mm_prefix_lm "
                         "list is not read; kbtool/solve/engines/vllm/mmprefix.py)")
    if env.get("attention") in (None, "gqa", "mha", "mqa") and version in recorded() and has_mm_axis(
            version, env, platform):
        return from_grid(img, env, version, requested, platform)
    fix = f"run `kb probe sweep --lib vllm --releases {version}` to record it"
    return Selection(version, [], {}, None, requested,
                     f"depends on use_mm_prefix (vLLM sets it for this multimodal prefix-LM model), which vLLM "
                     f"{version}'s recorded selector grid does not ask; {fix}", source=fix)


GRID_WINDOW = 1
"""The sliding_window of a grid point asked with has_sliding_window True: vLLM's selector reads only whether a
layer has a window (vllm/model_executor/layers/attention/attention.py: `sliding_window is not None`), so any window
> 0 stands for every one."""


def vllm_env(cc: float, *, dtype: str, kv: str, head_size: int, block: int | None, layout: str,
             sink: bool, trtllm: bool, archs: dict[str, str | None], num_heads: int | None = None,
             sliding: bool | None = None) -> dict[str, Any]:
    """The query environment for one vLLM selector configuration (the probe's grid point). `archs` is
    {architecture id: compute capability} as the architecture records give it (Image.cc): `sm` is the record
    whose compute capability is `cc`, and is left out where none is. `sliding`: has_sliding_window as the grid
    asked it (sliding_window GRID_WINDOW or 0), or None where it did not (sliding_window left unknown)."""

    d = DTYPE_OF_VLLM.get(dtype, dtype)
    env: dict[str, Any] = {
        "cc": cc, "dtype": d, "kv_dtype": d if kv == "auto" else KV_OF_VLLM.get(kv, kv), "head_dim": head_size,
        "attention": {"dense": "gqa", "mla": "mla", "sparse": "sparse-mla"}[layout],
        "sparse": layout == "sparse", "sinks": sink, "trtllm_kernels": trtllm, "vendor": "nvidia",
        "kv_cache_dtype": kv,
    }
    sm = architecture_of(cc, archs)
    if sm is not None:
        env["sm"] = sm
    if block is not None:
        env["block_size"] = block
    if num_heads is not None:
        env["num_heads"] = num_heads
    if sliding is not None:
        env["sliding_window"] = GRID_WINDOW if sliding else 0
    return env


# ---- MLA as vLLM runs it -------------------------------------------------------------------------
# The MLA backends above are decode backends. vLLM picks the MLA *prefill* backend separately; each release's
# order (by compute capability and MLA dimensions), the backends its own checks refuse by default and what each
# backend calls are the `mla_prefill` block of its engine-priority record (kbtool/solve/engines/vllm/records.py compiles
# them). Prefill runs uncompressed: qk = qk_nope + rope (192 for DeepSeek-V3), v = v_head_dim (128).


def prefill_order(img: Image, env: dict[str, Any], version: str | None,
                  platform: str = "cuda") -> tuple[list[str], list[str], str] | None:
    """vLLM's MLA prefill order for the release and platform: (backends in the order tried, each shown with what
    it calls; the ones its own checks refuse by default, with why; the source), or None where no record of the
    release holds one (an unrecorded release: never another release's order in its place)."""
    if version is None:
        return None
    for _id, plat, scope, lists, calls in img.engine_data("vllm")["mla_prefill"]:
        if plat != platform or not _in_range(version, scope):
            continue
        for when, order, refused, source in lists:
            if evaluate(when, env) is True:
                shown = {b: f"{b} ({calls[b]})" if b in calls else b for b in order}
                return ([shown[b] for b in order if b not in refused],
                        [f"{shown[b]}: {why}" for b, why in refused.items()], source)
        return None
    return None


def mla_path(img: Image, env: dict[str, Any], selected: str | None, version: str | None = None,
             platform: str | None = None) -> dict[str, Any]:
    """Prefill path, decode backend and KV layout of an MLA model under vLLM."""
    nope, rope, v = env.get("qk_nope_head_dim"), env.get("qk_rope_head_dim"), env.get("v_head_dim")
    qk = (nope or 128) + (rope or 64)
    kv = env.get("kv_dtype")
    latent = env.get("head_dim") or 576
    sized = img.kv_formats.get("fp8_ds_mla")
    if env.get("sparse") and kv in ("fp8_e4m3", "fp8_ds_mla") and sized is not None:
        layout = f"fp8_ds_mla: {sized[0]} B per token per layer (fp8 latent, scales, bf16 rope; {sized[1]})"
    else:
        width = 1 if kv in ("fp8_e4m3", "fp8_e5m2") else 2
        layout = f"one latent per token per layer: {latent} x {width} B = {latent * width} B ({kv}), no K/V pair"
    got = prefill_order(img, env, version, platform or platform_of(env))
    out: dict[str, Any] = {"decode": selected, "prefill": got[0] if got else [],
                           "prefill_shape": f"qk {qk} / v {v or 128}", "kv_layout": layout}
    if got is None:
        known = ", ".join(versions(img)) or "none"
        out["prefill_unrecorded"] = f"vLLM {version}'s MLA prefill order is not recorded (recorded: {known})"
    else:
        out["prefill_source"] = got[2]
        if got[1]:
            out["prefill_refused"] = got[1]
    if env.get("sparse"):
        out["indexer"] = ("DeepSeek sparse attention: a lightning indexer picks the top-k (2048) tokens per query; "
                          "it keeps its own fp8 key cache beside the latent cache (mla/indexer.py)")
    return out


def answer_for(img: Image, env: dict[str, Any], assumed: dict[str, Any], version: str | None = None,
               requested: str | None = None, kv_spelling: str | None = None) -> dict[str, Any]:
    """The `engine` part of a query answer: vLLM's selection, the refusals and, for MLA, the path it runs."""
    e = dict(env)
    e.pop("phase", None)
    if e.get("attention") is None:
        e["attention"] = "gqa"
        assumed["attention"] = "gqa (no model given: vLLM's non-MLA lists)"
    if e.get("sparse") and e["attention"] == "mla":
        e["attention"] = "sparse-mla"
    for var, default in (("sinks", False), ("sparse", False), ("trtllm_kernels", True)):
        if var == "trtllm_kernels" and e.get("vendor") not in (None, "nvidia"):
            continue  # FlashInfer's TRT-LLM cubins are NVIDIA's
        if var not in e:
            e[var] = default
            assumed[var] = f"{default} (vLLM engine default)" if var != "trtllm_kernels" else (
                "True (flashinfer-cubin installed or NVIDIA's artifactory reachable)")
    kv = e.get("kv_dtype")
    if kv_spelling:
        e["kv_cache_dtype"] = kv_spelling
    elif kv in ("fp8_e4m3", "fp8_e5m2", "nvfp4"):
        e["kv_cache_dtype"] = {"fp8_e4m3": "fp8"}.get(kv, kv)
        assumed["kv_cache_dtype"] = f"{e['kv_cache_dtype']} (--kv-cache-dtype as vLLM spells it)"
    else:
        e["kv_cache_dtype"] = "auto"
        if kv == "fp32":
            # vLLM checks the string "auto" against each backend's supported_kv_cache_dtypes, where every list
            # that holds "auto" also holds float16 and bfloat16 (0.33.0 v1/attention/backend.py:114-119,
            # backends/triton_attn.py:326-332, flex_attention.py:96-100); the claims were recorded at auto points
            # of 2-byte models, so a float32 model's auto cache is asked as one (its dtype gates still see fp32)
            e["kv_dtype"] = "bf16"
    sel = select(img, e, version, requested)
    out = sel.as_dict()
    if e["attention"] in ("mla", "sparse-mla"):
        out["mla"] = mla_path(img, e, sel.checks[sel.selected].name if sel.selected else None, sel.version)
    return out


def block_for(cx: Any, envs: dict[str, dict[str, Any]], assumed: dict[str, Any],
              memory: Any) -> dict[str, Any] | None:
    """vLLM's selection for the query on one accelerator (the decode phase's environment), with what it would print
    at start-up; None where the KB records no selection for any release."""
    q = cx.q
    if not versions(cx.img) or q.release is None:
        return None  # no recorded selection for this release: the engine layer alone answers
    env = dict(envs.get("decode") or next(iter(envs.values())))
    model = cx.model
    if model is not None:
        env.setdefault("sinks", bool(getattr(model, "sinks", False)))  # learned sinks (gpt-oss)
        env.setdefault("sparse", bool(getattr(model, "sparse", False)))  # DeepSeek sparse attention's indexer
        if "mm_prefix" not in env and not any(g.type in ("mla", "sparse-mla") for g in model.layers):
            from kbtool.solve.engines.vllm.mmprefix import decide, model_type

            if model_type(model) is not None:  # a multimodal prefix-LM architecture: its mask, or why not
                on, why = decide(model, q.release, q.settings)
                env["mm_prefix"] = on
                assumed["use_mm_prefix"] = f"{on if on is not None else 'unknown'} ({why})"
        mla = next((g for g in model.layers if g.type == "mla"), None)
        if model.num_heads:
            env.setdefault("num_heads", max(1, model.num_heads // max(1, q.gpus)))
        if mla is not None and mla.kv_lora_rank is not None and mla.rope_dim is not None:
            env.setdefault("kv_lora_rank", mla.kv_lora_rank)
            env.setdefault("qk_rope_head_dim", mla.rope_dim)
            if mla.head_dim:
                env.setdefault("qk_nope_head_dim", mla.head_dim - mla.rope_dim)
            if mla.head_dim_v:
                env.setdefault("v_head_dim", mla.head_dim_v)
            env["head_dim"] = mla.kv_lora_rank + mla.rope_dim  # vLLM's MLA head_size: the latent width
    engine = answer_for(cx.img, env, assumed, q.release, q.settings.get("attention_backend"),
                        q.settings.get("kv_cache_dtype"))
    engine["preflight"] = preflight(engine, memory, q.ctx or (model.max_context if model is not None else None),
                                    q.batch, getattr(model, "max_context", None))
    return engine


def pin_release(img: Image, q: Any) -> None:
    """--engine vllm: the release is --vllm, else --lib vllm=X, else the newest with priority records."""
    known = versions(img)
    asked = q.release
    # any release: answered from its recorded grid, or from the recorded releases around it (grid.py)
    if asked is not None and asked not in known:
        from kbtool.solve.conditions import is_release

        if not is_release(asked):
            from kbtool.errors import UsageError

            raise UsageError(f"--vllm {asked}: not a release number", fix="e.g. --vllm 0.28.0")
    if asked is None and "vllm" in q.libs:  # --lib vllm=X: that release's claims and its selection
        q.release = q.libs["vllm"]
        return
    version = asked or (known[-1] if known else None)
    if version is None:
        return
    q.release = version
    q.libs["vllm"] = version
    if asked is None:  # the newer releases kb records (their engine-release records; read from the image, cheap)
        from kbtool.solve.engines.vllm.defaults import rows

        newer = sorted((v for v in rows(img) if compare_versions(v, version) > 0),
                       key=version_key)
        q.release_note = f"{version} (the newest release kb records priority lists for" + (
            f"; {', '.join(newer)} answer{'s' if len(newer) == 1 else ''} from {'its' if len(newer) == 1 else 'their'}"
            f" recorded grid with --vllm {newer[-1]})" if newer else ")")


def preflight(engine: dict[str, Any], memory: Any, ctx: int | None, batch: int | None,
              model_max: int | None = None) -> str:
    """What `vllm serve` would say at startup: the backend and KV capacity, or the error it raises."""
    if ctx and model_max and ctx > model_max:  # vllm/config/model.py, _get_and_verify_max_len
        return (f"ValueError: User-specified max_model_len ({ctx}) is greater than the derived max_model_len "
                f"(max_position_embeddings={model_max} ...). To allow overriding this maximum, set the env var "
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.")
    if engine.get("between"):
        return f"vLLM {engine['vllm']} is not recorded: {engine['between']}"
    if str(engine.get("error") or "").startswith(("depends on use_mm_prefix", "depends on has_sliding_window",
                                                     "depends on compute capability")):
        return f"vLLM {engine['vllm']}'s choice {engine['error']}"
    if engine.get("error"):
        if engine.get("requested"):
            return f"ValueError: {engine['error']}"
        reasons = ", ".join(f"{b['name']}: [{', '.join(b['reasons'])}]" for b in engine["backends"] if b["reasons"])
        return f"ValueError: {engine['error']}. Reasons: {{{reasons}}}."
    name = next((b["name"] for b in engine["backends"] if b["id"] == engine.get("selected")), engine.get("selected"))
    text = f"Using {name} attention backend"
    if memory is None or ctx is None:
        return text + " (give --model and --ctx / --max-model-len for the KV check)"
    gib = 2**30
    if memory.capacity_bytes and memory.weights_bytes > memory.capacity_bytes:
        return (f"torch.OutOfMemoryError: CUDA out of memory while loading the weights "
                f"({memory.weights_bytes / gib:,.1f} GiB per GPU on a {memory.capacity_bytes / gib:,.1f} GiB GPU); "
                "raise -tp")
    if memory.available_bytes <= 0:
        return ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                "when initializing the engine.")
    per_seq = memory.kv_bytes / max(1, batch or 1)
    if memory.fits is False:
        return (f"ValueError: To serve at least one request with the model's max seq len ({ctx}), "
                f"({per_seq / gib:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
                f"({memory.available_bytes / gib:.2f} GiB). Based on the available memory, the estimated maximum "
                f"model length is {memory.max_ctx}. Try increasing `gpu_memory_utilization` or decreasing "
                f"`max_model_len` when initializing the engine.")
    seqs = memory.available_bytes / per_seq if per_seq else 0.0
    tokens = int(memory.available_bytes / memory.kv_bytes_per_token) if memory.kv_bytes_per_token else 0
    return (f"{text}; KV cache {memory.available_bytes / gib:,.2f} GiB ({tokens:,} tokens); maximum concurrency for "
            f"{ctx:,} tokens per request: {seqs:.2f}x")
