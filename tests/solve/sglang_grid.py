"""Shared by the SGLang replay tests and the sglang-resolve probe's judge: a recorded grid
(probes/_sglang_grid.py output) as resolve() inputs and SGLang's outcomes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from kbtool.solve.sglang.args import parse_argv
from kbtool.solve.sglang.facts import model_facts

FIELDS = ("prefill", "decode", "page_size", "kv_cache_dtype", "dsa_prefill_backend", "dsa_decode_backend")
MEMORY = ("mem_fraction_static", "chunked_prefill_size", "decode_graph_max_bs")


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def platform(p: dict[str, Any]) -> dict[str, Any]:
    cap = p["capability"]
    cuda = p["kind"] == "cuda"
    return {"vendor": "nvidia" if cuda else "amd", "cc": cap[0] + cap[1] / 10,
            "cuda": p.get("torch_version_cuda") if cuda else None, "gpu_mem_mib": float(p["memory_mib"]),
            "flashinfer_available": bool((p.get("facts") or {}).get("has_flashinfer", cuda))}


def points(grid: dict[str, Any]) -> list[tuple[str, str, list[str], dict[str, Any], dict[str, Any], dict[str, Any],
                                               dict[str, Any]]]:
    """(platform, model, argv, platform facts, model facts, ServerArgs fields, SGLang's outcome) per grid row."""
    plats = {k: platform(v) for k, v in grid["platforms"].items()}
    facts = {k: model_facts(v) for k, v in grid["models"].items()}
    out = []
    for p, m, _tag, a, o in grid["rows"]:
        argv = grid["argvs"][a]
        args = parse_argv(argv).server_args()
        out.append((p, m, argv, plats[p], facts[m], args, grid["outcomes"][o]))
    return out


def differs(got: dict[str, Any], want: dict[str, Any], fields: tuple[str, ...] = FIELDS) -> list[str]:
    """The fields where kb's resolution differs from SGLang's (the error: type and exact message)."""
    if "error" in want or "error" in got:
        if (got.get("error"), got.get("message")) != (want.get("error"), want.get("message")):
            return ["error"]
        return []
    return [f for f in fields if got.get(f) != want.get(f)]
