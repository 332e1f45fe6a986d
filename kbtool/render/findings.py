"""Validation reports: grouped by check, with counts; or JSON. Written through kbtool.render.sink (ANSI styles on
a terminal, plain text otherwise; control characters in record text shown as visible escapes), not rich."""

from __future__ import annotations

import json
import sys
from itertools import groupby

from kbtool.checks import by_code
from kbtool.render.sink import for_stream
from kbtool.validate import Report


def text(report: Report) -> None:
    checks = by_code()
    out = for_stream(sys.stdout)
    for code, group in groupby(report.findings, key=lambda f: f.code):
        items = list(group)
        chk = checks.get(code)
        title = f"{code} {chk.name}" if chk else code
        out.line([(title, "bold"), (f" ({len(items)})", "")])
        for f in items:
            colour = "red" if f.severity == "error" else "yellow"
            out.line([("  ", ""), (f.severity, colour), (f" {f.text()}", "")])
            if f.fix:
                out.line([(f"    fix: {f.fix}", "dim")])
    e, w = len(report.errors), len(report.warnings)
    status = ("ok", "green") if not e else ("failed", "red")
    out.line([status, (f": {report.files} files, {report.records} records, {e} errors, {w} warnings", "")])


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

    out = for_stream(sys.stdout)
    for c in all_checks():
        out.line([(f"{c.code}  {c.name:28} {c.description}", "")])
