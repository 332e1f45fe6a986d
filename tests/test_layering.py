"""Layers import downward only (design.md §3). The layers are named sets of units (a unit is a top-level module or
package of kbtool):

    probes/ (the probe programs) -> cli -> commands -> library (views / solve / probe / bench / checks and their
    helpers) -> graph -> store -> model

The probe programs sit on top: they import their judges (kbtool/probe/judges/), and no kbtool module imports them
(the runner loads a program by name when it runs one; `kb validate` judges with kbtool alone).

A unit may import any unit of a lower layer, and a unit of its own layer only where the imports inside the layer
form no cycle; a few pairs inside a layer are forbidden outright (solve never imports bench). Every import in
kbtool/ is read, relative ones resolved (`from ..solve import image` in store/ is kbtool.solve), function-level
ones too; `if TYPE_CHECKING:` blocks, which never run, are not. Only cli/ imports typer; only cli/ and render/
import rich."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PKG = Path(__file__).resolve().parent.parent / "kbtool"

LAYERS: dict[str, set[str]] = {
    "cli": {"__main__", "launch", "cli"},                              # the console script and typer
    "commands": {"query_cli", "schema_io", "scaffold", "modelimport", "validate", "render"},  # what cli calls
    "library": {"views", "solve", "probe", "bench", "checks", "measure", "topic", "schema_docs", "fmt"},
    "graph": {"graph", "kb"},                                          # the loaded, indexed, linked records
    "store": {"store"},
    "model": {"model", "errors", "findings", "paths", "vocab", "names", "escape", "__init__"},
}
ORDER = list(LAYERS)  # top first
FORBIDDEN = {("solve", "bench"), ("checks", "views"), ("probe", "views")}
LAYER_OF = {unit: name for name, units in LAYERS.items() for unit in units}


def _unit(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "kbtool":
        return None
    return "__init__" if len(parts) == 1 else parts[1]


def _module_name(rel: str) -> str:
    parts = ["kbtool", *rel.removesuffix(".py").split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.Module, module: str = "kbtool.x", is_package: bool = False,
                     type_only: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module) of every import that can run: TYPE_CHECKING blocks left out (kept with `type_only`),
    relative imports resolved against `module` (a package's __init__ resolves against itself)."""
    out: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]

    def absolute(node: ast.ImportFrom) -> str:
        if node.level == 0:
            return node.module or ""
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        return ".".join([*base, *([node.module] if node.module else [])])

    def visit(node: ast.AST) -> None:
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                and not type_only):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = absolute(node)
            out.append((node.lineno, target))
            if _unit(target) is not None:  # `from kbtool import scaffold`, `from .. import solve`: submodules
                out.extend((node.lineno, f"{target}.{a.name}") for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def _modules(type_only: bool = False) -> list[tuple[str, str, list[tuple[int, str]]]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        unit = rel.split("/")[0].removesuffix(".py")
        out.append((rel, unit, _runtime_imports(ast.parse(path.read_text()), _module_name(rel),
                                                path.name == "__init__.py", type_only)))
    return out


def violations(modules: list[tuple[str, str, list[tuple[int, str]]]]) -> list[str]:
    bad = []
    inside = nx.DiGraph()
    for rel, unit, imports in modules:
        for line, mod in imports:
            if mod.split(".")[0] == "probes":
                bad.append(f"{rel}:{line}: {unit} imports {mod} (a probe program, above kbtool: move what it needs "
                           f"into kbtool/probe/judges/)")
                continue
            target = _unit(mod)
            if target is None or target == unit:
                continue
            if target not in LAYER_OF and (PKG / target).exists() is False and not (PKG / f"{target}.py").exists():
                continue  # `from kbtool import __version__`-like names that are no unit
            if unit not in LAYER_OF or target not in LAYER_OF:
                bad.append(f"{rel}:{line}: {unit} or {target} has no layer (add it to LAYERS)")
                continue
            mine, theirs = ORDER.index(LAYER_OF[unit]), ORDER.index(LAYER_OF[target])
            if (unit, target) in FORBIDDEN:
                bad.append(f"{rel}:{line}: {unit} must not import {mod}")
            elif theirs < mine:
                bad.append(f"{rel}:{line}: {unit} ({LAYER_OF[unit]}) imports {mod} ({LAYER_OF[target]}, above it)")
            elif theirs == mine:
                inside.add_edge(unit, target, where=f"{rel}:{line}")
    for cycle in nx.simple_cycles(inside):
        where = [inside.edges[a, b]["where"] for a, b in zip(cycle, [*cycle[1:], cycle[0]], strict=True)]
        bad.append(f"import cycle inside a layer: {' -> '.join([*cycle, cycle[0]])} ({', '.join(where)})")
    return bad


def test_layers_point_down() -> None:
    assert violations(_modules()) == []


def test_every_unit_has_a_layer() -> None:
    units = {p.name.removesuffix(".py") for p in PKG.iterdir() if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert units - set(LAYER_OF) == set()


@pytest.mark.parametrize(("unit", "source"), [
    ("store", "def f():\n    from kbtool.solve.image import x\n"),
    ("store", "from ..solve import image\n"),  # relative, upward
    ("store", "from .. import checks\n"),
    ("store", "import kbtool.checks\n"),
    ("solve", "from kbtool.bench.records import x\n"),  # same layer, forbidden pair
    ("model", "from ..kb import KB\n"),
    ("probe", "from probes import vllm_selector\n"),  # a judge reaching up into a probe program
    ("probe", "def f():\n    import probes.vllm_boot\n"),
])
def test_an_upward_import_is_caught(unit: str, source: str) -> None:
    tree = ast.parse(source)
    assert violations([(f"{unit}/x.py", unit, _runtime_imports(tree, f"kbtool.{unit}.x"))]) != []


def test_a_relative_import_inside_a_unit_or_downward_passes() -> None:
    tree = ast.parse("from .reader import x\nfrom ..model import Claim\nfrom . import cache\n")
    assert violations([("store/x.py", "store", _runtime_imports(tree, "kbtool.store.x"))]) == []


def test_a_cycle_inside_a_layer_is_caught() -> None:
    a = ("checks/a.py", "checks", _runtime_imports(ast.parse("from kbtool.probe import x\n"), "kbtool.checks.a"))
    b = ("probe/b.py", "probe", _runtime_imports(ast.parse("from ..checks import y\n"), "kbtool.probe.b"))
    assert violations([a]) == [] and violations([a, b]) != []


def test_typer_and_rich_stay_at_the_edge() -> None:
    offenders = []
    for rel, _, imports in _modules():
        mods = {m.split(".")[0] for _, m in imports}
        if "typer" in mods and not rel.startswith("cli/"):
            offenders.append(f"{rel} imports typer")
        if "rich" in mods and not rel.startswith(("cli/", "render/")):
            offenders.append(f"{rel} imports rich")
        if "click" in mods:
            offenders.append(f"{rel} imports click (use typer's)")
    assert offenders == []


def module_cycles(modules: list[tuple[str, str, list[tuple[int, str]]]]) -> list[list[str]]:
    """Import circles between modules (inside a package too): each module's runtime imports, resolved to the
    kbtool module they name (a package's own submodules excepted, which it may import)."""
    names = {_module_name(rel) for rel, _, _ in modules}
    g = nx.DiGraph()
    for rel, _unit, imports in modules:
        me = _module_name(rel)
        for _line, mod in imports:
            while mod and mod not in names:
                mod = mod.rpartition(".")[0]
            if mod and mod != me and not me.startswith(mod + "."):
                g.add_edge(me, mod)
    return sorted(sorted(c) for c in nx.simple_cycles(g))


def test_no_module_imports_itself_round_a_circle() -> None:
    assert module_cycles(_modules()) == []


def test_no_circle_even_through_type_only_imports() -> None:
    """The types an answer is made of sit below what makes them (parts and engine results below the engines and
    the decision; the image and the query below the engines; building the image and reading a request above
    them): a type-only import that closes a circle is a layer out of place, not a harmless annotation."""
    assert module_cycles(_modules(type_only=True)) == []


def test_the_circle_scan_sees_one() -> None:
    mods = [("a/x.py", "a", [(1, "kbtool.a.y")]), ("a/y.py", "a", [(3, "kbtool.a.x")]), ("a/z.py", "a", [])]
    assert module_cycles(mods) == [["kbtool.a.x", "kbtool.a.y"]]
