"""A warm `kb query` stays lean: not even typer, pydantic, rich, the YAML reader, typing or dataclasses, let
alone round-trip YAML, jsonschema, networkx or torch (design.md §6, issue #8). Checked on sys.modules of a
real `kb` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.util import DATA, ROOT

FIX = str(DATA / "kb_fixture")
NEVER = ("ruamel", "jsonschema", "networkx", "torch")
NOT_WARM = ("typer", "pydantic", "rich", "yaml", "kbtool.cli", "kbtool.model", "typing", "dataclasses", "hashlib",
            "pathlib", "json", "difflib")

PROBE = """
import json, sys
sys.argv = ["kb", *json.loads(sys.argv[1])]
from kbtool.launch import main
try:
    main()
except SystemExit:
    pass
with open({out!r}, "w") as f:
    json.dump(sorted(sys.modules), f)
"""


def _modules(args: list[str], cache: Path, out: Path) -> set[str]:
    env = {**os.environ, "KB_CACHE_DIR": str(cache)}
    env.pop("KB_NO_CACHE", None)
    subprocess.run([sys.executable, "-c", PROBE.format(out=str(out)), json.dumps(args)], cwd=ROOT, env=env,
                   capture_output=True, text=True, timeout=120, check=False)
    return set(json.loads(out.read_text()))


def _loaded(mods: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if any(m == n or m.startswith(n + ".") for n in names))


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
