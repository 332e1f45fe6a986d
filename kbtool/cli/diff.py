"""`kb diff --ENGINE A B`: the command; its options come from each engine's release option (Engine.options), the
comparison from kbtool/views/releasediff.py, the words from kbtool/render/releasediff.py."""

from __future__ import annotations

import typer

from kbtool.cli.app import app
from kbtool.errors import UsageError

OPTIONS: tuple[tuple[str, str, str, str, str], ...] = (
    ("--gpu", "gpu", "str", "G", ""), ("--model", "model", "str", "M", ""), ("--ctx", "ctx", "str", "TOKENS", ""),
    ("--kv", "kv", "str", "DTYPE", ""), ("--kb", "kb", "str", "PATH", ""), ("--json", "json", "flag", "", ""))


def parse(argv: list[str]) -> dict[str, str | bool | None] | None:
    """The options of `kb diff ARGV` by key (engine, a, b, gpu, model, ctx, kv, kb, json); None for --help."""
    from kbtool.query_cli import read
    from kbtool.solve.engines import registry

    flags = {f: e.name for e in registry.ENGINES.values() if (f := e.release_flag())}
    table = tuple((f, f"release:{name}", "pair", "A B", "") for f, name in flags.items()) + OPTIONS
    raw = read(argv, table, "kb diff")
    if raw is None:
        return None
    pins = [k for k in raw if k.startswith("release:")]
    if len(pins) > 1:
        raise UsageError("kb diff: compares the releases of one engine", fix="give one release option")
    if not pins:
        raise UsageError("kb diff: which engine's releases?", fix=f"give one of {', '.join(flags)} A B")
    out: dict[str, str | bool | None] = {k: v for k, v in raw.items() if not k.startswith("release:")}
    out["engine"] = pins[0].removeprefix("release:")
    out["a"], out["b"] = raw[pins[0]]
    if out.get("model") and not out.get("gpu"):
        raise UsageError("kb diff: --model answers on one accelerator", fix="add --gpu, e.g. --gpu h100")
    return out


@app.command(add_help_option=False, context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                                      "help_option_names": []})
def diff(ctx: typer.Context) -> None:
    """Why a pool or backend changed between two releases.

    Usage: kb diff --vllm A B [--gpu G [--model M] [--ctx TOKENS] [--kv DTYPE]] [--json] [--kb PATH]

    Compares the two releases' serve defaults (records/engine-releases, each change with its source at B), the
    engine's own recordings (backends new and removed, selections changed per compute capability, release facts
    of its config resolution), and the claims whose version scope holds at one release and not the other. With
    --gpu (and --model, --ctx, --kv) it solves the same question under each release and shows them side by side:
    backend per phase, block size, batch defaults, reserve, pool, concurrency, whether it starts, and what moved
    the pool. A release nothing is recorded of exits 2 naming the recorded ones.

    Examples:
      kb diff --vllm 0.33.0 0.34.0
      kb diff --vllm 0.24.0 0.33.0 --gpu a100 --model gemma-3-27b
      kb diff --sglang 0.5.17 0.5.23 --json
    """
    import json

    opts = parse(list(ctx.args))
    if opts is None:
        import inspect

        typer.echo(inspect.cleandoc(diff.__doc__ or ""))
        raise typer.Exit(0)
    from pathlib import Path

    from kbtool.cli.app import _load_kb
    from kbtool.query_cli import image
    from kbtool.views.releasediff import diff as compare

    kb_path = opts.get("kb")
    kb = _load_kb(Path(str(kb_path)) if kb_path else None)
    img = image(str(kb_path) if kb_path else None, use_cache=True)
    question = {k: opts[k] for k in ("model", "ctx", "kv") if opts.get(k)}
    gpu = opts.get("gpu")
    result = compare(kb, img, str(opts["engine"]), str(opts["a"]), str(opts["b"]),
                     gpu=str(gpu) if gpu else None, **question)
    if opts.get("json"):
        from kbtool.cli.app import print

        print(json.dumps(result.to_dict(), indent=2, default=str))
        return
    from kbtool.render.console import out
    from kbtool.render.releasediff import release_diff

    release_diff(out, result)
