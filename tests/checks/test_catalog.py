"""One explicit list of checks: all_checks() is the same whatever else was imported, and holds every @check."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from kbtool.checks import all_checks

CHECKS = Path(__file__).resolve().parents[2] / "kbtool" / "checks"


def _codes(before: str) -> list[str]:
    code = f"{before}\nfrom kbtool.checks import all_checks\nprint(' '.join(c.code for c in all_checks()))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def test_importing_validate_changes_nothing() -> None:
    bare = _codes("")
    assert bare == _codes("import kbtool.validate") == _codes("import kbtool.cli")
    assert "KB306" in bare and "KB303" in bare


def test_every_decorated_check_is_listed() -> None:
    decorated = set()
    for path in CHECKS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for d in node.decorator_list:
                    if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "check":
                        decorated.add(d.args[0].value)  # type: ignore[attr-defined]
    listed = {c.code for c in all_checks()}
    assert decorated and decorated <= listed
    assert listed - decorated == {"KB100", "KB101"}  # done while loading


def test_each_check_module_has_its_own_test_file() -> None:
    here = Path(__file__).parent
    modules = {p.stem for p in CHECKS.glob("*.py") if p.stem != "__init__"}
    assert modules and {m for m in modules if not (here / f"test_{m}.py").is_file()} == set()
