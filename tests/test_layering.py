"""Layers import downward only (design.md §3): cli -> commands -> views/solve/probe/bench/checks -> graph ->
store -> model. Every import in kbtool/ is read (function-level ones too; `if TYPE_CHECKING:` blocks, which
never run, are not), and each module's layer must be above the layer of everything it imports. Only cli.py
imports typer; only cli.py and render/ import rich."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "kbtool"

# unit (a top-level module or package of kbtool) -> layer; a unit may import only units of a lower layer
LAYERS: dict[str, float] = {
    "__main__": 10, "launch": 9,                                      # the console script
    "cli": 8,                                                         # typer: parse, call, render
    "query_cli": 7, "schema_io": 7, "scaffold": 7, "modelimport": 7,  # commands
    "render": 6.5, "validate": 6,                                     # what commands print with, and call
    "views": 5.5, "bench": 5.4, "checks": 5.35, "probe": 5.3, "solve": 5.1,  # the library
    "measure": 5, "topic": 4.5, "schema_docs": 4.45, "fmt": 4.4,
    "graph": 4,
    "kb": 3,                                                          # the loaded, indexed records
    "store": 2,
    "model": 1,
    "errors": 0, "findings": 0, "paths": 0, "vocab": 0, "names": 0.5, "__init__": 0,
}


def _unit(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "kbtool":
        return None
    return "__init__" if len(parts) == 1 else parts[1]


def _runtime_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every import that can run: TYPE_CHECKING blocks left out."""
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            if node.module == "kbtool":  # `from kbtool import scaffold`: the submodules named
                out.extend((node.lineno, f"kbtool.{a.name}") for a in node.names if (PKG / a.name).exists()
                           or (PKG / f"{a.name}.py").exists())
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def _modules() -> list[tuple[str, str, list[tuple[int, str]]]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        unit = rel.split("/")[0].removesuffix(".py")
        out.append((rel, unit, _runtime_imports(ast.parse(path.read_text()))))
    return out


def violations(modules: list[tuple[str, str, list[tuple[int, str]]]]) -> list[str]:
    bad = []
    for rel, unit, imports in modules:
        for line, mod in imports:
            target = _unit(mod)
            if target is None or target == unit:
                continue
            if unit not in LAYERS or target not in LAYERS:
                bad.append(f"{rel}:{line}: {unit} or {target} has no layer (add it to LAYERS)")
            elif LAYERS[target] >= LAYERS[unit]:
                bad.append(f"{rel}:{line}: {unit} imports {mod} (layer {LAYERS[target]} >= {LAYERS[unit]})")
    return bad


def test_layers_point_down() -> None:
    assert violations(_modules()) == []


@pytest.mark.parametrize(("unit", "module"), [("store", "kbtool.solve.image"), ("store", "kbtool.checks"),
                                               ("solve", "kbtool.bench.records"), ("model", "kbtool.kb")])
def test_an_upward_import_is_caught(unit: str, module: str) -> None:
    tree = ast.parse(f"def f():\n    from {module} import x\n")
    assert violations([(f"{unit}/x.py", unit, _runtime_imports(tree))]) != []


def test_typer_and_rich_stay_at_the_edge() -> None:
    offenders = []
    for rel, _, imports in _modules():
        mods = {m.split(".")[0] for _, m in imports}
        if "typer" in mods and rel != "cli.py":
            offenders.append(f"{rel} imports typer")
        if "rich" in mods and rel != "cli.py" and not rel.startswith("render/"):
            offenders.append(f"{rel} imports rich")
        if "click" in mods:
            offenders.append(f"{rel} imports click (use typer's)")
    assert offenders == []
