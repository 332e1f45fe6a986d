"""Which attention backends, page size and KV dtype SGLang resolves, or which error it raises (issue 27).

SGLang resolves its server arguments in one ordered pipeline of hooks (0.5.23 sglang/srt/arg_groups/pipeline.py;
0.5.17 ServerArgs.__post_init__). kb keeps that pipeline as the `steps` of the engine-priority record
`sglang-<release>-cuda` and runs it here, reading only the compiled image (kbtool/solve/image.py, section
"sglang"): a step sets fields where its condition holds, picks a default from the platform's priority lists,
or runs a claim, whose refusal is the error SGLang raises at that point (its message, exception type and
place from the claim record). The state is a flat dict of kb condition variables (kbtool/vocab.py): a backend
field not given is "none", a number not given is 0.

Model and platform facts come from kbtool/solve/engines/sglang/facts.py; the command line from sglang_args.py.
"""

from __future__ import annotations

from kbtool.solve.conditions import evaluate
from kbtool.solve.engines.sglang.facts import model_facts, model_facts_from_record, platform_facts
from kbtool.solve.templates import fill

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.image import Image

__all__ = ["model_facts", "model_facts_from_record", "platform_facts", "releases", "resolve"]

# ServerArgs field -> the state variable it starts
_ARG_VARS = {
    "attention_backend": "attention_backend", "prefill_attention_backend": "prefill_attention_backend",
    "decode_attention_backend": "decode_attention_backend",
    "speculative_draft_attention_backend": "draft_attention_backend",
    "dsa_prefill_backend": "dsa_prefill_backend", "dsa_decode_backend": "dsa_decode_backend",
    "speculative_algorithm": "spec_algorithm",
}
_NUM_ARGS = {"page_size": "page_size", "speculative_eagle_topk": "spec_topk", "tp_size": "tp",
             "attn_cp_size": "attn_cp_size", "max_running_requests": "max_running_requests",
             "chunked_prefill_size": "chunked_prefill_size", "cuda_graph_max_bs_decode": "decode_graph_max_bs",
             "context_length": "ctx"}
_UNSET = "none"


def releases(img: Image) -> list[str]:
    """The SGLang releases whose resolution the KB records, oldest first."""

    from kbtool.solve.conditions import version_key

    return sorted(img.engine_data("sglang")["releases"], key=version_key)


def _state(release: str, platform: dict[str, Any], facts: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    env: dict[str, Any] = {"engine": "sglang", "sglang": release}
    env.update(platform)
    env.update({k: v for k, v in facts.items() if not k.startswith("_")})
    for field, var in _ARG_VARS.items():
        v = args.get(field)
        env[var] = _UNSET if v is None else (str(v).upper() if var == "spec_algorithm" else str(v))
    for field, var in _NUM_ARGS.items():
        v = args.get(field)
        if v is not None:
            env[var] = int(v)
        elif var not in env:
            env[var] = 1 if var in ("tp", "attn_cp_size") else 0
    # ModelConfig.get_num_kv_heads(tp): KV heads per TP rank, at least one
    env["kv_heads"] = max(1, int(facts.get("_mla_kv_heads") or 1) // max(1, env["tp"]))
    env["kv_cache_dtype"] = str(args.get("kv_cache_dtype") or "auto")
    env["disable_radix_cache"] = bool(args.get("disable_radix_cache"))
    env["mamba_extra_buffer"] = args.get("mamba_scheduler_strategy") == "extra_buffer" or \
        args.get("mamba_radix_cache_strategy") == "extra_buffer"
    env["decode_graph_max_bs_given"] = args.get("cuda_graph_max_bs_decode") is not None
    mem = args.get("mem_fraction_static")
    env["mem_fraction_given"] = mem is not None
    env["mem_fraction_static"] = float(mem) if mem is not None else 0.0
    cuda_graph_off = bool(args.get("disable_cuda_graph"))
    env["decode_graph"] = "disabled" if cuda_graph_off or args.get("disable_decode_cuda_graph") else \
        str(args.get("cuda_graph_backend_decode") or "full")
    env["prefill_graph"] = "disabled" if cuda_graph_off or args.get("disable_prefill_cuda_graph") else \
        str(args.get("cuda_graph_backend_prefill") or "breakable")
    env["dsa_defaults_done"] = False
    env["_args"] = args
    return env


def _derive(env: dict[str, Any]) -> None:
    """The variables SGLang computes from others at every read (attention_backends_of and friends)."""
    base = env["attention_backend"]
    pre, dec = env["prefill_attention_backend"], env["decode_attention_backend"]
    env["prefill_backend"] = pre if pre != _UNSET else base
    env["decode_backend"] = dec if dec != _UNSET else base
    env["split_backends_equal"] = pre != _UNSET and pre == dec
    env["phases_same_backend"] = env["prefill_backend"] == env["decode_backend"]
    mrr = env.get("max_running_requests") or 0
    env["decode_graph_max_bs_over_running"] = bool(mrr) and (env.get("decode_graph_max_bs") or 0) > mrr


def _value(v: Any, env: dict[str, Any], consts: dict[str, Any]) -> Any:
    if not isinstance(v, tuple):
        return v
    _tag, var, times = v
    if var == "mem_fraction_estimate":
        from kbtool.solve.engines.sglang.fraction import mem_fraction

        return mem_fraction(env, consts)
    if var == "mem_fraction_static_x085":
        return env["mem_fraction_static"] * consts["aiter_long_context_factor"]
    x = env[var]
    return x * times if times != 1 else x


def _pick(lists: list[tuple[Any, list[str]]], env: dict[str, Any]) -> str | None:
    for when, order in lists:
        if evaluate(when, env) is True:
            return order[0]
    return None


def _refusal(img: Image, cid: str, env: dict[str, Any], release: str) -> dict[str, Any] | None:
    """SGLang's error where claim `cid` refuses in `env`, else None."""
    when, requires, message, where, _scope = img.engine_data("sglang")["claims"][cid]
    if when is not None and evaluate(when, env) is not True:
        return None
    if requires is not None and evaluate(requires, env) is not False:
        return None
    exc, place = where.get(release, ("ValueError", None))
    shown = {k: ("None" if v == _UNSET else v) for k, v in env.items()}
    return {"error": exc, "message": fill(message, shown), "where": place, "claim": cid}


def resolve(img: Image, release: str, platform: dict[str, Any], facts: dict[str, Any],
            args: dict[str, Any], trace: dict[str, Any] | None = None) -> dict[str, Any]:
    """SGLang `release`'s resolution of `args` (ServerArgs fields, kbtool/solve/engines/sglang/args.py) for a model
    (`facts`, model_facts) on a platform (platform_facts): the backends and settings with the record step or
    claim that set each, or the error it raises. With `trace` (a dict), the state each claim was checked on
    goes to trace["checks"][claim id] and the last state (resolved, or where it raised) to trace["env"]: what
    the sglang-resolve probe judges each claim on."""
    sec = img.engine_data("sglang")
    pipes = sec["pipelines"].get(release)
    if not pipes:
        from kbtool.errors import UsageError

        raise UsageError(f"the KB records SGLang's resolution for {', '.join(releases(img)) or 'no release'} only, "
                         f"not {release}", fix="pick a recorded release")
    main = pipes["cuda"]
    plat = "rocm" if platform.get("vendor") == "amd" and "rocm" in pipes else "cuda"
    lists = pipes[plat]["lists"]
    consts = main["constants"]
    env = _state(release, platform, facts, args)
    by: dict[str, str] = {}
    _derive(env)
    for i, (name, when, sets, keep, pick, check, _src) in enumerate(main["steps"]):
        if when is not None and evaluate(when, env) is not True:
            continue
        step_id = f"{main['id']}#{i}:{name}"
        if check is not None:
            if trace is not None:
                trace.setdefault("checks", {})[check] = trace["env"] = dict(env)
            err = _refusal(img, check, env, release)
            if err is not None:
                return err
            continue
        if pick is not None:
            got = _pick(lists, env)
            if got is not None:
                env[pick] = got
                by[pick] = f"{pipes[plat]['id']}#{name}"
        else:
            for field, v in sets:
                if field in dict(keep) and env.get(field) in dict(keep)[field]:
                    continue
                env[field] = _value(v, env, consts)
                by[field] = step_id
        _derive(env)
    if trace is not None:
        trace["env"] = dict(env)
    return _outcome(env, by)


_OUT = {"prefill": "prefill_backend", "decode": "decode_backend", "attention_backend": "attention_backend",
        "page_size": "page_size", "kv_cache_dtype": "kv_cache_dtype", "dsa_prefill_backend": "dsa_prefill_backend",
        "dsa_decode_backend": "dsa_decode_backend", "mem_fraction_static": "mem_fraction_static",
        "chunked_prefill_size": "chunked_prefill_size", "decode_graph": "decode_graph",
        "decode_graph_max_bs": "decode_graph_max_bs", "prefill_graph": "prefill_graph"}


def _outcome(env: dict[str, Any], by: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, var in _OUT.items():
        v = env.get(var)
        out[field] = None if v == _UNSET else v
    out["by"] = {field: by[var] for field, var in _OUT.items() if var in by}
    return out
