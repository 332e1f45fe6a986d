"""KB322 release-named-claim: a claim whose id names one release while its range spans others (issue 46).

`kb probe events` extends a claim's range to the releases that still hold it, and an id such as
vllm-flash-attn-head-size-0.33.0 then names one release of several. Such a claim gets a neutral id and statement
(what it holds, not the release), with the old id under `formerly`: the evidence that names it (never edited),
links and `kb show OLD-ID` still find the claim (kbtool/kb.py follow_renames; KB207 keeps former ids unambiguous).
"""

from __future__ import annotations

import re

from kbtool.checks import check, in_focus
from kbtool.findings import Finding
from kbtool.kb import KB
from kbtool.model import Claim
from kbtool.model.common import VersionRange

RELEASE_ID = re.compile(r"-(\d+\.\d+\.\d+)$")


def release_named(claim: Claim) -> str | None:
    """The release a claim's id ends in, where its range spans other releases too; None otherwise."""
    m = RELEASE_ID.search(claim.id)
    if m is None or not claim.scope:
        return None
    release = m.group(1)
    only = all(r.introduced == release and r.last_affected == release and r.fixed is None for r in claim.scope)
    return None if only else release


def _span(r: VersionRange) -> str:
    end = f"before {r.fixed}" if r.fixed else (r.last_affected or "...")
    return f"{r.library} {r.introduced or '...'} to {end}"


@check("KB322", "release-named-claim", "a claim whose id names a release holds for that release only")
def find_release_named_claims(kb: KB) -> list[Finding]:
    out = []
    for c in kb.of_kind("claim", Claim):
        release = release_named(c)
        if release is None or not in_focus(kb, c.id):
            continue
        file, line = kb.location(c.id, "id")
        out.append(Finding("KB322", f"claim id '{c.id}' names release {release}, but its range spans more "
                           f"({'; '.join(_span(r) for r in c.scope)})", file, line, "$.id", severity="warning",
                           check="release-named-claim",
                           fix="give it a neutral id and statement (what it holds, not the release) and list "
                               f"'{c.id}' under `formerly:`"))
    return out
