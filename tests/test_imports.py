"""A warm `kb query` stays lean: not even typer, pydantic, rich, the YAML reader, typing, dataclasses or re (nor
textwrap), let alone round-trip YAML, jsonschema, networkx or torch (design.md §6, issue #8). Checked on sys.modules
of a real `kb` process (python -X importtime)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.util import DATA, ROOT

FIX = str(DATA / "kb_fixture")
NEVER = ("ruamel", "jsonschema", "networkx", "torch")
NOT_WARM = ("typer", "pydantic", "rich", "yaml", "kbtool.cli", "kbtool.model", "typing", "dataclasses", "hashlib",
            "pathlib", "json", "difflib", "re", "textwrap", "enum", "functools", "collections")
"""functools and collections: `python -m` (runpy) imports them itself, so they are judged beyond what runpy takes."""

def imported(args: list[str], cache: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `kb ARGS` in a fresh interpreter with -X importtime; (the process, every module it imported).

    importtime reports each import as it happens, so this holds even though a fast answer ends the process
    with os._exit."""
    env = {**os.environ, "KB_CACHE_DIR": str(cache)}
    env.pop("KB_NO_CACHE", None)
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "kbtool", *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    mods = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    return r, mods - {"package"}


def _modules(args: list[str], cache: Path, out: Path) -> set[str]:
    return imported(args, cache)[1]


_RUNPY: set[str] = set()


def _loaded(mods: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules of `names` (or inside them) that kb imported, beyond what `python -m` imports by itself."""
    if not _RUNPY:
        r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import runpy"], capture_output=True,
                           text=True, timeout=60, check=True)
        _RUNPY.update(line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines()
                      if line.startswith("import time:"))
    return sorted(m for m in mods - _RUNPY if any(m == n or m.startswith(n + ".") for n in names))


def test_warm_query_imports_nothing_heavy(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    out = tmp_path / "mods.json"
    cold = _modules(["query", "--kb", FIX, "--gpu", "gpu-hopper", "--ctx", "64k"], cache, out)
    assert "kbtool.solve.solver" in cold  # the probe really ran a query
    assert _loaded(cold, ("pydantic", "yaml")) != []  # the cold one read and validated the records
    # the query image is warm; a new question runs the solver on it
    warm = _modules(["query", "--kb", FIX, "--gpu", "gpu-blackwell", "--ctx", "128k", "--kv", "fp8"], cache, out)
    assert "kbtool.solve.solver" in warm
    assert _loaded(warm, NEVER + NOT_WARM) == []


def test_warm_serve_line_query_stays_lean(tmp_path: Path) -> None:
    """README's engine example on the shipped records, warm: nothing of NOT_WARM either. The recorded flag tables
    come marshalled from the cache folder (kbtool/store/jsoncache.py), so json (and the re, enum, functools and
    collections it imports, ~8 ms on 2 cores) stay out; model names are read without re."""
    cache = tmp_path / "cache"
    args = ["query", "--gpu", "h100", "--vllm-args", "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 "
            "--max-model-len 32k --kv-cache-dtype fp8 --enable-prefix-caching"]
    imported(args, cache)
    r, warm = imported(args, cache)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    assert "kbtool.solve.engines.vllm.engine" in warm
    assert _loaded(warm, NEVER + NOT_WARM) == []
