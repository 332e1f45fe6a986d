"""Neutral code names no engine (issue 43, design.md §3): outside the engines' own folders (kbtool/solve/engines/),
no identifier, import or string in solve/, render/ or the command modules (query_cli.py, cli/) names an engine,
so the house has no default engine and a new one is its folder and a registry line. Comments and docstrings may
cite an engine's source (they are where a fact comes from, not a branch on a name)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "kbtool"
NEUTRAL = [*sorted((PKG / "solve").glob("*.py")), *sorted((PKG / "render").glob("*.py")), PKG / "query_cli.py",
           *sorted((PKG / "cli").glob("*.py"))]
NAMES = ("vllm", "sglang")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # attribute docstrings
            out.add(id(node.value))
    return out


def engine_names(source: str) -> list[tuple[int, str]]:
    """(line, text) of every identifier, import and non-docstring string that names an engine."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    hits: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Name):
            texts = [node.id]
        elif isinstance(node, ast.Attribute):
            texts = [node.attr]
        elif isinstance(node, ast.alias):
            texts = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            texts = [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            texts = [node.value]
        elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.arg | ast.keyword):
            texts = [getattr(node, "name", None) or getattr(node, "arg", None) or ""]
        for t in texts:
            if any(n in t.lower() for n in NAMES):
                hits.append((getattr(node, "lineno", 0), t[:60]))
    return hits


def test_neutral_code_names_no_engine() -> None:
    found = [f"{p.relative_to(PKG.parent)}:{line}: {text!r}" for p in NEUTRAL
             for line, text in engine_names(p.read_text())]
    assert found == []


def test_the_scan_finds_a_name() -> None:
    code = 'import kbtool.solve.engines.vllm\nx = "sglang"\nif q.engine == "vllm":\n    pass\n"""vLLM docs"""\n'
    assert [line for line, _ in engine_names(code)] == [1, 2, 3]
