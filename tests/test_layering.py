"""Only cli.py imports typer; only cli.py and render/ import rich (design.md §3)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "kbtool"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_typer_and_rich_stay_at_the_edge() -> None:
    offenders = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        mods = _imports(path)
        if "typer" in mods and rel != "cli.py":
            offenders.append(f"{rel} imports typer")
        if "rich" in mods and rel != "cli.py" and not rel.startswith("render/"):
            offenders.append(f"{rel} imports rich")
        if "click" in mods:
            offenders.append(f"{rel} imports click (use typer's)")
    assert offenders == []
