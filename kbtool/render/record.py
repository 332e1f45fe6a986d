"""`kb show` for records other than topics: the record as YAML, then its verification."""

from __future__ import annotations

import yaml
from rich.console import Console
from rich.markup import escape

from kbtool.kb import KB
from kbtool.model import Claim, Record


def render_record(rec: Record, kb: KB, console: Console | None = None) -> None:
    from kbtool.render.console import out

    c = console or out
    data = rec.model_dump(by_alias=True, exclude_defaults=True, mode="json")
    c.print(escape(str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)).rstrip()))
    if isinstance(rec, Claim):
        v = rec.verification
        ev = ", ".join(v.evidence) or "none"
        c.print(f"\n[bold]verification:[/] {v.status} (evidence: {escape(ev)})")
        for e in v.evidence:
            if kb.get(e) is None:
                c.print(f"  [red]evidence {escape(e)} is not in kb[/]")
