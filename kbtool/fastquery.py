"""`kb query` without typer, pydantic or the YAML reader: the path a warm query takes (issue #8).

`run(argv)` answers when it can be sure to say exactly what the full CLI (kbtool/cli.py) would say: the
arguments are all plain `kb query` options in forms it parses here, and the records tree has a fresh query
image in the cache (kbtool/store/imagecache.py). Anything else returns None and the caller runs the full CLI,
which parses with typer, reports errors in its own words, and builds the image for next time: help, an
unknown or malformed option, `--no-cache`, a missing or stale image, any error while answering.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# option -> (keyword of build_query, how its value is read); "many" options repeat, others keep the last.
_VALUE = {
    "--gpu": ("gpu", "str"), "--gpus": ("gpus", "int"), "--ctx": ("ctx", "str"), "--kv": ("kv", "str"),
    "--dtype": ("dtype", "str"), "--model": ("model", "str"), "--head-dim": ("head_dim", "int"),
    "--batch": ("batch", "int"), "--phase": ("phase", "str"), "--engine": ("engine", "str"),
    "--kernel": ("kernel", "many"), "--lib": ("lib", "many"), "--block-size": ("block_size", "int"),
    "--util": ("util", "float"), "--kb": ("kb", "str"), "--vllm": ("vllm", "str"), "--vllm-args": ("vllm_args", "str"),
}
_FLAGS = {"--json": "json", "--explain": "explain", "--fail-on-no": "fail_on_no"}


def _int(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _float(text: str) -> float | None:
    t = text.replace(".", "", 1)
    return float(text) if t.isascii() and t.isdigit() else None


def parse(argv: list[str]) -> dict[str, Any] | None:
    """The options of `kb query ARGV` as build_query keywords (plus json/explain/fail_on_no/kb); None when any
    argument is not one this parser is sure it reads exactly as typer does."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in _FLAGS and not eq:
            out[_FLAGS[name]] = True
            i += 1
            continue
        if name not in _VALUE:
            return None  # help, --no-cache, a positional, an abbreviation, a typo: the full CLI decides
        if not eq:
            if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                return None  # a missing value, or one that looks like an option (typer's error message)
            value = argv[i + 1]
            i += 2
        else:
            i += 1
        key, how = _VALUE[name]
        parsed: Any = value
        if how == "int":
            parsed = _int(value)
        elif how == "float":
            parsed = _float(value)
        if parsed is None:
            return None
        if how == "many":
            out.setdefault(key, []).append(parsed)
        else:
            out[key] = parsed
    return out


def run(argv: list[str]) -> tuple[str, str, int] | None:
    """(stdout, stderr, exit code) of `kb query ARGV`, or None when the full CLI must run instead."""
    opts = parse(argv)
    if opts is None or os.environ.get("KB_NO_CACHE"):
        return None
    from kbtool.paths import records_root
    from kbtool.render.sink import wants_rich
    from kbtool.store import imagecache

    if wants_rich(sys.stderr) or (not opts.get("json") and wants_rich(sys.stdout)):
        return None  # a terminal: the full CLI styles the answer (and any warning) with rich
    root = records_root(opts.pop("kb", None))
    if not os.path.isdir(root):
        return None
    # a large tree is checked by a forked child, in parallel from now on; a small one here, later
    stat = imagecache.stat_later(root, parallel=imagecache.files_hint(root) >= imagecache.PARALLEL_FILES)
    got = imagecache.peek_speculative(root, stat)
    if got is None:
        stat()  # reap the checker
        return None
    payload, fresh = got
    try:
        answer = _answer(payload, opts)
    finally:
        ok = fresh()  # always reap the checker
    return answer if ok else None  # a changed tree: the full CLI rebuilds the image and answers


def _answer(payload: memoryview, opts: dict[str, Any]) -> tuple[str, str, int] | None:
    from kbtool.errors import KbError
    from kbtool.solve.image import Image
    from kbtool.solve.query import build_query
    from kbtool.solve.solver import solve

    img = Image.load(payload)
    if img is None:
        return None
    as_json, explain, fail_on_no = (opts.pop(k, False) for k in ("json", "explain", "fail_on_no"))
    try:
        answer = solve(img, build_query(**opts))
    except KbError:
        return None  # the full CLI reports it, in its words and with its exit code
    err = ""
    if as_json:
        from kbtool.solve.answer import to_json

        out = to_json(answer) + "\n"
    else:
        import io

        from kbtool.render.query import render_answer, render_multi
        from kbtool.render.sink import PlainSink
        from kbtool.solve.answer import MultiAnswer

        if img.skipped:
            err = f"warning: {len(img.skipped)} record(s) left out (run `kb validate`)\n"
        buf = io.StringIO()
        sink = PlainSink(buf)
        if isinstance(answer, MultiAnswer):
            render_multi(sink, answer, explain=explain)
        else:
            render_answer(sink, answer, explain=explain)
        out = buf.getvalue()
    rows = answer.rows if hasattr(answer, "rows") else [answer]
    return out, err, 1 if fail_on_no and any(r.verdict == "no" for r in rows) else 0
