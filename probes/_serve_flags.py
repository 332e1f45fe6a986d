"""Run under the interpreter that has vLLM or SGLang installed (no GPU, no kbtool): write the engine's own command-line
table, read from the argparse parser its serve command builds, as one JSON document.

    python probes/_serve_flags.py vllm OUT.json     # `vllm serve`: ServeSubcommand.subparser_init
    python probes/_serve_flags.py sglang OUT.json   # `python -m sglang.launch_server`: ServerArgs.add_cli_args

The document: {"engine", "release", "allow_abbrev", "underscores" (vLLM's FlexibleArgumentParser reads
--max_num_seqs as --max-num-seqs), "flags": {option string: {"dest", "kind" (switch | value), "type" (int,
float, str, human_int, or the callable's name), "choices" (or null), "nargs" (or null)}}, "positional": [dests]}.
kb's serve-line parsers (kbtool/solve/engines/*/args.py) read it from tests/data/<engine>/<release>/flags.json, and
tests/solve/test_serve_flags.py holds kb's own flag tables to it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _type_name(action: argparse.Action) -> str:
    t = action.type
    if t is None:
        return "str"
    name = getattr(t, "__name__", type(t).__name__)
    if name == "_optional_type" and getattr(t, "__closure__", None):  # vLLM's optional_type(T): "" / "None" or T
        inner = [c.cell_contents for c in t.__closure__ if callable(c.cell_contents)]
        name = getattr(inner[0], "__name__", name) if inner else name
    if name == "human_readable_int" or name.startswith("human_readable_int"):
        return "human_int"
    return {"int": "int", "float": "float", "str": "str"}.get(name, name)


def _choices(action: argparse.Action) -> list[str] | None:
    if action.choices is None:
        return None
    try:
        return [str(c) for c in action.choices]
    except TypeError:
        return None


def table(parser: argparse.ArgumentParser) -> dict:
    flags: dict[str, dict] = {}
    positional: list[str] = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if not action.option_strings:
            positional.append(action.dest)
            continue
        kind = "switch" if action.nargs == 0 else "value"
        for opt in action.option_strings:
            flags[opt] = {"dest": action.dest, "kind": kind, "type": _type_name(action) if kind == "value" else None,
                          "choices": _choices(action) if kind == "value" else None,
                          "nargs": action.nargs if isinstance(action.nargs, str) or action.nargs is None
                          else int(action.nargs)}
    return {"allow_abbrev": bool(parser.allow_abbrev), "flags": dict(sorted(flags.items())), "positional": positional}


def vllm_table() -> dict:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _vllm_grid import setup

    setup()
    import vllm
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser()
    serve = ServeSubcommand().subparser_init(top.add_subparsers())
    return {"engine": "vllm", "release": vllm.__version__, "entry_point": "vllm serve", "underscores": True,
            **table(serve)}


def sglang_table() -> dict:
    import sglang
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return {"engine": "sglang", "release": sglang.__version__, "entry_point": "python -m sglang.launch_server",
            "underscores": False, **table(parser)}


def main() -> None:
    engine, out = sys.argv[1], sys.argv[2]
    doc = vllm_table() if engine == "vllm" else sglang_table()
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"{doc['engine']} {doc['release']}: {len(doc['flags'])} option strings -> {out}")


if __name__ == "__main__":
    main()
