"""Validation reports: grouped by check, with counts; or JSON."""

from __future__ import annotations

import json
from itertools import groupby

from rich.markup import escape

from kbtool.checks import by_code
from kbtool.render.console import out
from kbtool.validate import Report


def text(report: Report) -> None:
    checks = by_code()
    for code, group in groupby(report.findings, key=lambda f: f.code):
        items = list(group)
        chk = checks.get(code)
        title = f"{code} {chk.name}" if chk else code
        out.print(f"[bold]{escape(title)}[/] ({len(items)})")
        for f in items:
            colour = "red" if f.severity == "error" else "yellow"
            out.print(f"  [{colour}]{f.severity}[/] {escape(f.text())}")
            if f.fix:
                out.print(f"    [dim]fix: {escape(f.fix)}[/]")
    e, w = len(report.errors), len(report.warnings)
    status = "[green]ok[/]" if not e else "[red]failed[/]"
    out.print(f"{status}: {report.files} files, {report.records} records, {e} errors, {w} warnings")


def as_json(report: Report) -> None:
    payload = {
        "ok": not report.errors,
        "files": report.files,
        "records": report.records,
        "counts": {code: len(list(g)) for code, g in groupby(report.findings, key=lambda f: f.code)},
        "findings": [f.as_dict() for f in report.findings],
    }
    print(json.dumps(payload, indent=2))


def list_checks() -> None:
    from kbtool.checks import all_checks

    for c in all_checks():
        out.print(f"{c.code}  {c.name:28} {escape(c.description)}")
