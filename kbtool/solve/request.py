"""A request as the user typed it (`kb query`'s options, an engine's release and pasted serve line) made a Query.
It sits above the engines: each engine parses its own serve line (`Engine.parse_line`) and applies its settings;
kbtool/solve/query.py holds the Query and the value parsers it shares with them."""

from __future__ import annotations

from kbtool.errors import UsageError
from kbtool.solve.engines import registry as engines
from kbtool.solve.query import (
    Query,
    parse_assume,
    parse_ctx,
    parse_cuda,
    parse_dtype,
    parse_kv,
    parse_libs,
    parse_phase,
    parse_size,
    parse_util,
    parse_weights,
    positive_int,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def split_engines(text: str | None) -> list[str]:
    """--engine 'vllm,sglang' -> ['vllm', 'sglang'] (one name: a list of one; none given: ['none'])."""
    example = ",".join(engines.names())
    names = [n.strip().lower() for n in (text or "none").split(",") if n.strip()]
    if len(names) != len(set(names)):
        raise UsageError(f"--engine {text}: an engine named twice", fix=f"e.g. --engine {example}")
    if len(names) > 1 and "none" in names:
        raise UsageError(f"--engine {text}: 'none' cannot be compared", fix=f"e.g. --engine {example}")
    return names or ["none"]


def parse_engine(text: str | None) -> str:
    known = ["none", *engines.names()]
    t = (text or "none").strip().lower()
    if t not in known:
        raise UsageError(f"--engine: unknown engine '{text}'", fix=f"use one of {', '.join(known)}")
    return t


def build_query(*, gpu: str | None = None, gpus: int | None = None, ctx: str | None = None,
                kv: str | None = None, dtype: str | None = None, model: str | None = None,
                head_dim: int | None = None, batch: int | None = None, phase: str | None = None,
                engine: str | None = None, kernel: list[str] | None = None, lib: list[str] | None = None,
                block_size: int | None = None, util: float | None = None, weights: str | None = None,
                reserve: str | None = None, max_num_batched_tokens: int | None = None,
                assume: str | None = None, cuda: str | None = None, **engine_opts: str | None) -> Query:
    """Parse raw CLI values into a Query (names are resolved against the KB later, by the solver).

    `engine_opts` are each engine's own: NAME (its release, e.g. vllm="0.24.0") and NAME_args (a pasted serve
    line, e.g. sglang_args="python -m sglang.launch_server ..."), read by that engine's module
    (kbtool/solve/engines/registry.py): the line's model, context, KV dtype and GPUs fill kb's options the user left
    out."""
    built = {k: v for k, v in locals().items() if k not in ("engines", "engine_opts")} | engine_opts
    kernels = [k.strip() for item in (kernel or []) for k in item.split(",") if k.strip()]
    libs = parse_libs(lib)
    cu = parse_cuda(cuda)
    if cu is not None:
        libs["cuda"] = cu
    given = {k: v for k, v in engine_opts.items() if v is not None}
    for key in given:
        if key.removesuffix("_args") not in engines.names():
            raise TypeError(f"build_query() got an unexpected keyword argument '{key}'")
    lines = [(k.removesuffix("_args"), v) for k, v in given.items() if k.endswith("_args")]
    if len(lines) > 1:
        raise UsageError(f"{' and '.join(f'--{n}-args' for n, _ in lines)}: one serve line per query",
                         fix="give one, or compare engines with --engine A,B and kb's own options")
    for key in given:
        engine = engine or key.removesuffix("_args")  # --vllm X or --sglang-args ... imply their engine
    line = None
    gpus_flag = "--gpus"
    if lines:  # a pasted serve line; explicit kb options win over its flags
        name, text = lines[0]
        eng = engines.ENGINES[name]
        flag = eng.line_flag()
        asked = (given.get(name) or "").strip().lstrip("v") or libs.get(name)  # --vllm X, else --lib vllm=X
        line, line_note = read_line(eng, text, asked)
        opts: dict[str, Any] = {"model": model, "ctx": ctx, "kv": kv, "gpus": gpus, "util": util,
                                "block_size": block_size, "dtype": dtype,
                                "max_num_batched_tokens": max_num_batched_tokens, "weights": weights}
        found = dict(line.options)
        pasted_kv = found.pop("kv_pasted", None)  # as the line spells it; the options' "kv" leaves auto out
        spelled_tp = found.pop("gpus_flag", None)
        if kv is not None and pasted_kv == "auto" and parse_kv(str(kv)) not in ("bf16", "fp16"):
            raise UsageError(f"--kv {kv} conflicts with {flag} --kv-cache-dtype auto (the model's own dtype)",
                             fix="give the KV dtype once: drop --kv, or change the serve line")
        for k, v in found.items():
            if k == "kv" and opts.get(k) is not None and v is not None and parse_kv(str(opts[k])) != parse_kv(str(v)):
                raise UsageError(f"--kv {opts[k]} conflicts with {flag} --kv-cache-dtype {v}",
                                 fix="give the KV dtype once: drop --kv, or change the serve line")
            if opts.get(k) is None and v is not None:
                opts[k] = v
        if gpus is None and opts["gpus"] is not None:  # the GPUs came from the line: errors name its flag
            gpus_flag = f"{flag} {spelled_tp or '-tp'}"
        model, ctx, kv, gpus, util = opts["model"], opts["ctx"], opts["kv"], opts["gpus"], opts["util"]
        block_size, dtype, weights = opts["block_size"], opts["dtype"], opts["weights"]
        max_num_batched_tokens = opts["max_num_batched_tokens"]
    q = Query(
        gpu=gpu.strip() if gpu else None,
        gpus=positive_int(gpus, gpus_flag, "8") or 1,
        ctx=parse_ctx(ctx) if ctx is not None else None,
        kv=parse_kv(kv) if kv is not None else None,
        dtype=parse_dtype(dtype) if dtype is not None else None,
        model=model.strip() if model else None,
        head_dim=positive_int(head_dim, "--head-dim", "128"),
        batch=positive_int(batch, "--batch", "32"),
        phases=parse_phase(phase),
        engine=parse_engine(engine),
        kernels=kernels,
        libs=libs,
        block_size=positive_int(block_size, "--block-size", "16"),
        utilization=parse_util(util) if util is not None else None,
        weights=parse_weights(weights),
        reserve=parse_size(reserve),
        batched_tokens=positive_int(max_num_batched_tokens, "--max-num-batched-tokens", "8192"),
        assume=parse_assume(assume),
    )
    q.gpus_flag = gpus_flag
    for key in given:  # the engine's release and line belong to that engine
        name = key.removesuffix("_args")
        eng = engines.ENGINES[name]
        if q.engine != name:
            flags = " and ".join(f for f in (eng.release_flag(), eng.line_flag()) if f)
            raise UsageError(f"{flags} are about {eng.label}", fix=f"add --engine {name} (or leave --engine out)")
        if not key.endswith("_args"):
            q.release = (given[key] or "").strip().lstrip("v") or None
    if line is not None:
        engines.ENGINES[q.engine].apply_line(q, line)
        q.built, q.line_read_with = built, line.read_with
        if line_note is not None:  # the line is older than the newest release: answered for the one that reads it
            q.release, q.release_note = line.read_with, line_note
    return q


def read_line(eng: Any, text: str, asked: str | None) -> tuple[Any, str | None]:
    """The serve line read with `asked`'s flag table, and a note where kb chose another release for it. With no
    release asked, a line the newest recorded parser refuses (a flag it does not know, an option that became an
    ambiguous prefix: --cuda-graph-max-bs once SGLang split it) is read with the newest release whose recorded parser
    has each refused flag as its own option and takes the whole line, and the answer is for that release, the one
    the line was written for; where none does, the newest reads it as before (its refusal, or its unknown flags
    listed). A flag an older parser would only take as a prefix of another option is not enough."""
    from kbtool.solve.engines.flags import AmbiguousOption, table, table_releases

    try:
        line, refusal = eng.parse_line(text, asked), None
    except AmbiguousOption as exc:
        if asked is not None:
            raise
        line, refusal = None, exc
    if asked is not None or (line is not None and not line.refused):
        return line, None
    bad = [refusal.flag] if refusal is not None else list(line.refused)
    rels = table_releases(eng.name)
    for rel in rels[1:]:
        tbl = table(eng.name, eng.line_flag() or "", rel)
        if tbl is None or not all(tbl.has(f) for f in bad):
            continue
        try:
            older = eng.parse_line(text, rel)
        except UsageError:
            continue
        if not older.refused:
            why = refusal.what if refusal is not None else \
                f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a flag of it"
            return older, (f"{rel} (the newest release whose recorded parser takes every flag of the line; "
                           f"{eng.label} {rels[0]}'s refuses it: {why})")
    if refusal is not None:
        raise refusal
    return line, None


def reread(q: Query, reader: str | None) -> None:
    """Read the pasted serve line again as the pinned release reads it, where the flag table that read it
    (`q.line_read_with`) is not `reader`, the one for `q.release`: the release was not known when the line was read
    (it is the default the engine pins from the records). The query is built again from the same arguments with
    that release asked for, so the line's refusals and readings are that release's."""
    if q.built is None or q.release is None or reader is None or reader == q.line_read_with:
        return
    again = build_query(**{**q.built, q.engine: q.release})
    for k in q.__slots__:
        setattr(q, k, getattr(again, k))
