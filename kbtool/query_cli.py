"""`kb query`: its options, parsing, the query image, the answer. The one implementation of the command.

The console script (kbtool/launch.py) calls `main` before typer, pydantic or rich are imported; the typer
app's `query` command (kbtool/cli.py) hands its arguments to the same `main`. OPTIONS, with each registered
engine's own options (Engine.options) before the output flags, is the command's whole interface (`options()`): add
a row to add an option (its key is a keyword of `build_query`, or a flag read here).

The answer comes from the query image (kbtool/solve/image.py), cached per records tree (kbtool/store/cache.py)
and checked for freshness here, in this process. A tree without a fresh image is validated first: when any
record has an error, the query refuses with the located findings (exit 2) instead of answering from it.
"""

from __future__ import annotations

import os
import sys

from kbtool.errors import KbError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.image import Image

# (flag, key, kind, metavar, help); kind: str | int | float | many (repeatable str) | flag
OPTIONS: tuple[tuple[str, str, str, str, str], ...] = (
    ("--gpu", "gpu", "str", "ID", "Accelerator id or alias (h100, b200, ...). Without it: one row per accelerator."),
    ("--gpus", "gpus", "int", "N", "Tensor-parallel GPUs."),
    ("--ctx", "ctx", "str", "TOKENS", "Context: 131072, 128k, 1m (k = 1024)."),
    ("--kv", "kv", "str", "DTYPE", "KV dtype: bf16, fp16, fp8 (e4m3), fp8_e5m2, fp4."),
    ("--dtype", "dtype", "str", "DTYPE", "Compute dtype (default bf16)."),
    ("--model", "model", "str", "ID", "Model id or alias, or a Hugging Face config.json path."),
    ("--head-dim", "head_dim", "int", "N", "Head dim (overrides the model's)."),
    ("--batch", "batch", "int", "N", "Concurrent sequences (memory; default 1)."),
    ("--phase", "phase", "str", "PHASE", "prefill, decode or both (default)."),
    ("--engine", "engine", "str", "NAME", "none (default) or an engine kb answers for (its options follow); "
     "several, comma-separated, answer side by side."),
    ("--kernel", "kernel", "many", "ID", "Restrict to these kernels (repeatable)."),
    ("--lib", "lib", "many", "NAME=VERSION", "Library version (repeatable), e.g. flashinfer=0.6.18."),
    ("--block-size", "block_size", "int", "N", "Paged-KV block size."),
    ("--gpu-memory-utilization", "util", "float", "X", "Share of GPU memory the engine may use (default 0.9)."),
    ("--util", "util", "float", "X", "Alias of --gpu-memory-utilization."),
    ("--weights", "weights", "str", "FORMAT", "Weights as deployed: bf16, fp8, int8, int4, nvfp4, mxfp4 "
                                              "(default: as released)."),
    ("--reserve", "reserve", "str", "SIZE", "Activation + CUDA-graph reserve per GPU, e.g. 4GiB (default: "
                                            "estimated)."),
    ("--max-num-batched-tokens", "max_num_batched_tokens", "int", "N", "The engine's token budget per "
                                                                      "step (default: the engine's own)."),
    ("--assume", "assume", "str", "PROFILE", "typical (default): fill inputs not given from the documented profile "
     "(kbtool/solve/profile.py) and list them; none: strict, unknown where an input is missing."),
    ("--cuda", "cuda", "str", "VERSION", "CUDA version, e.g. 12.8."),
    ("--json", "json", "flag", "", "Print the answer as JSON (schema/query-answer.schema.json)."),
    ("--explain", "explain", "flag", "", "Add sources and evidence."),
    ("--fail-on-no", "fail_on_no", "flag", "", "Exit 1 when the verdict is no."),
    ("--no-cache", "no_cache", "flag", "", "Read every record afresh; skip the cache."),
    ("--kb", "kb", "str", "PATH", "Records tree (default: $KB_RECORDS, the checkout, or the installed copy)."),
)


def _engine_options() -> tuple[tuple[str, str, str, str, str], ...]:
    """Each registered engine's own options (kbtool/solve/engines/results.py Option): its release pin is keyed NAME,
    its serve line NAME_args, as build_query reads them."""
    from kbtool.solve.engines import registry

    return tuple((o.flag, e.name if o.key == "release" else f"{e.name}_args", "str", o.metavar, o.help)
                 for e in registry.ENGINES.values() for o in e.options)


_TAIL = 5  # --json, --explain, --fail-on-no, --no-cache, --kb: after the engines' own options


def options() -> tuple[tuple[str, str, str, str, str], ...]:
    """The command's whole interface: kb's own options, with each registered engine's before the output flags."""
    return OPTIONS[:-_TAIL] + _engine_options() + OPTIONS[-_TAIL:]
_READ_HERE = ("json", "explain", "fail_on_no", "no_cache", "kb")
MAX_INT = (1 << 31) - 1  # no count, size or dimension kb sizes comes near it

HELP = "Answer a serving question: kernels, reasons, caveats, KV fit."


def help_text() -> str:
    rows = [(f"{f} {m}".strip(), h) for f, _, _, m, h in options()] + [("-h, --help", "Show this message and exit.")]
    width = max(len(a) for a, _ in rows)
    return "\n".join(["Usage: kb query [OPTIONS]", "", f"  {HELP}", "",
                      "  Can this accelerator serve this context with this KV dtype (and model, engine, libraries)?",
                      "", "Options:", *(f"  {a:<{width}}  {h}" for a, h in rows)]) + "\n"


def _number(flag: str, kind: str, text: str) -> int | float:
    t = text.strip()
    try:
        if not t.isascii() or len(t) > 32:
            raise ValueError
        value: int | float = int(t) if kind == "int" else float(t)
    except ValueError:
        raise UsageError(f"{flag}: '{text}' is not {'an integer' if kind == 'int' else 'a number'}",
                         fix=f"e.g. {flag} {'128' if kind == 'int' else '0.9'}") from None
    if kind == "int" and abs(value) > MAX_INT:
        raise UsageError(f"{flag}: {t} is too large (at most {MAX_INT})", fix=f"e.g. {flag} 128")
    if kind == "float" and value != value:  # NaN
        raise UsageError(f"{flag}: '{text}' is not a number", fix=f"e.g. {flag} 0.9")
    return value


def read(argv: list[str], table: tuple[tuple[str, str, str, str, str], ...], command: str) -> dict[str, Any] | None:
    """The options of `COMMAND ARGV` by key, read against TABLE ((flag, key, kind, metavar, help) rows; kind: str, int,
    float, many (repeatable str), pair (two values, e.g. two releases) or flag); None for --help. Anything malformed
    raises UsageError naming the flag and the value as typed."""
    out: dict[str, Any] = {}
    by_flag = {o[0]: o for o in table}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("-h", "--help"):
            return None
        flag, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        opt = by_flag.get(flag)
        if opt is None:
            import difflib

            near = difflib.get_close_matches(flag, list(by_flag), n=1)
            what = "option" if arg.startswith("-") else "argument"
            raise UsageError(f"{command}: unexpected {what} '{arg}'",
                             fix=f"did you mean {near[0]}?" if near else f"see `{command} --help`")
        _, key, kind, metavar, _ = opt
        if kind == "flag":
            if eq:
                raise UsageError(f"{command}: {flag} takes no value", fix=f"write {flag} alone")
            out[key] = True
            continue
        if kind == "pair":
            if eq or i + 2 > len(argv) or any(v.startswith("-") for v in argv[i:i + 2]):
                raise UsageError(f"{command}: {flag} needs two values", fix=f"e.g. {command} {flag} {metavar}")
            out[key] = (argv[i], argv[i + 1])
            i += 2
            continue
        if not eq:
            if i >= len(argv):
                raise UsageError(f"{command}: {flag} needs a value", fix=f"e.g. {flag} {metavar}")
            value = argv[i]
            i += 1
        if kind == "many":
            out.setdefault(key, []).append(value)
        else:
            out[key] = _number(flag, kind, value) if kind in ("int", "float") else value
    return out


def parse(argv: list[str]) -> dict[str, Any] | None:
    """The options of `kb query ARGV` by key; None for --help. Anything malformed raises UsageError."""
    out = read(argv, options(), "kb query")
    if out is not None and out.get("gpu") is not None and not out["gpu"].strip():
        raise UsageError("--gpu: an empty name names no accelerator", fix="e.g. --gpu h100, or leave --gpu out")
    return out


def main(argv: list[str]) -> int:
    """Run `kb query ARGV`: print the answer (or the error) and return the exit code."""
    try:
        return _run(argv)
    except KbError as e:
        _print_error(e)
        return e.exit_code
    except BrokenPipeError:  # the reader went away (`kb query ... | head -1`): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if os.environ.get("KB_DEBUG"):
            raise
        hint = " (is kb being reinstalled? run it again when pip is done)" if isinstance(e, ImportError) else ""
        sys.stderr.write(f"kb: internal error: {type(e).__name__}: {_clean(str(e))}{hint}\n  please report this "
                         "(set KB_DEBUG=1 for the traceback)\n")
        return 3


def _clean(text: str) -> str:
    """kbtool.render.sink.clean, or, where it cannot be imported (a half-replaced install while `pip install -e`
    runs), Python's own escaping: the error handler must not fail in turn."""
    try:
        from kbtool.render.sink import clean
    except Exception:
        return repr(text)[1:-1]
    return clean(text)


def _print_error(e: KbError) -> None:
    sys.stderr.write(f"error: {_clean(str(e.args[0]) if e.args else '')}\n")
    if e.fix:
        sys.stderr.write(f"  fix: {_clean(e.fix)}\n")


def _run(argv: list[str]) -> int:
    opts = parse(argv)
    if opts is None:
        sys.stdout.write(help_text())
        return 0
    as_json, explain, fail_on_no, no_cache, kb = (opts.pop(k, None) for k in _READ_HERE)
    from kbtool.solve.request import build_query, split_engines
    from kbtool.solve.solver import solve

    names = split_engines(opts.get("engine"))
    img = image(kb, use_cache=not no_cache)
    if len(names) > 1:
        answer: Any = _compare(img, opts, names)
    else:
        answer = solve(img, build_query(**opts))
    from kbtool.render.verdict import word

    word(answer)  # the sentences: summary, rows' summary, where engines differ (one module words them)
    if as_json:
        from kbtool.solve.answer import to_json

        out = to_json(answer) + "\n"
    else:
        import io

        from kbtool.render.query import render_answer, render_comparison, render_multi
        from kbtool.render.sink import for_stream

        buf = io.StringIO()
        sink = for_stream(sys.stdout)
        sink._stream = buf  # styled for stdout, rendered whole first (an error leaves nothing half-written)
        from kbtool.solve.answer import EngineComparison, MultiAnswer

        if isinstance(answer, MultiAnswer):
            render_multi(sink, answer, explain=bool(explain))
        elif isinstance(answer, EngineComparison):
            render_comparison(sink, answer, explain=bool(explain))
        else:
            render_answer(sink, answer, explain=bool(explain))
        out = buf.getvalue()
    sys.stdout.write(out)
    sys.stdout.flush()
    rows = answer.rows if hasattr(answer, "rows") else [answer]
    return 1 if fail_on_no and any(r.verdict == "no" for r in rows) else 0


def _compare(img: Image, opts: dict[str, Any], names: list[str]) -> Any:
    """--engine vllm,sglang: the same question to each engine. A pasted serve line (--vllm-args, --sglang-args)
    is its own engine's; the others get the model, context, KV dtype, dtype and GPUs it names."""
    from kbtool.solve.compare import compare
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    if not opts.get("gpu"):
        raise UsageError(f"--engine {opts['engine']}: a comparison is of one accelerator",
                         fix="add --gpu, e.g. --gpu h100")
    derived: dict[str, Any] = {}
    for n in names:
        line = opts.get(f"{n}_args")
        if line:
            lq = build_query(engine=n, **{f"{n}_args": line})
            derived = {"model": lq.model, "ctx": str(lq.ctx) if lq.ctx else None, "kv": lq.kv, "dtype": lq.dtype,
                       "gpus": lq.gpus if lq.gpus > 1 else None}
    answers: list[Any] = []
    for n in names:
        o = {k: v for k, v in opts.items() if k != "engine"}
        for other in names:
            if other != n:
                o.pop(other, None)
                o.pop(f"{other}_args", None)
        if not o.get(f"{n}_args"):
            for k, v in derived.items():
                if o.get(k) is None and v is not None:
                    o[k] = v
        answer = solve(img, build_query(engine=n, **o))
        if not hasattr(answer, "engine"):
            raise UsageError("--engine with several engines needs one accelerator", fix="add --gpu")
        answers.append(answer)
    return compare(answers)


def image(kb: str | None = None, use_cache: bool = True) -> Image:
    """The query image of the records tree: from the cache when fresh, else validated, built and cached."""
    from kbtool.paths import records_root, root_problem
    from kbtool.solve.image import Image
    from kbtool.store import cache

    root = records_root(kb)
    problem = root_problem(root)
    if problem is not None:
        raise UsageError(problem[0], fix=problem[1])
    use_cache = use_cache and cache.cache_dir() is not None
    if use_cache:
        payload = cache.read(root)
        img = Image.load(payload) if payload is not None else None
        if img is not None:
            return img
    tree = cache.tree_key(root) if use_cache else b""
    from kbtool.solve.imagebuild import build, dump

    data = build(checked_kb(root))
    if use_cache and cache.tree_key(root) == tree:  # nothing changed while it was read
        cache.write(root, tree, dump(data))
    return Image(data)


# The checks whose errors would make an answer wrong: unreadable or invalid records (left out), duplicate ids
# and colliding aliases (which record answers?), impossible values (negative memory). References the solver
# does not follow (evidence ids, topics) and style do not stop a query; `kb validate` reports them.
BLOCKING = ("KB1", "KB201", "KB203", "KB4")


def checked_kb(root: str) -> Any:
    """The records under `root` as a KB, when none has a BLOCKING error; else UsageError with the findings."""
    from pathlib import Path

    from kbtool.validate import validate

    report = validate(Path(root), only=BLOCKING)
    if report.errors:
        shown = report.errors[:20]
        more = f"\n  ... and {len(report.errors) - len(shown)} more" if len(report.errors) > len(shown) else ""
        lines = "\n".join(f"  {f.text()}" for f in shown)
        raise UsageError(f"the records do not validate ({len(report.errors)} error(s)); not answering from them:\n"
                         f"{lines}{more}", fix="run `kb validate` and fix the records")
    return report.kb
