"""Evidence judged again today, as `kb validate` (KB303, KB306) and `kb probe events` read it.

Each evidence record's cases are judged again by today's probe against today's claims (kbtool.probe.rejudge), the
record's own verdicts standing where its probe cannot judge it again. The answers are cached by content
(kbtool.probe.verdict_cache): a run after an edit judges only the records whose inputs the edit changed.
"""

from __future__ import annotations

from typing import Any

from kbtool.kb import KB
from kbtool.model import Claim, Evidence

_JUDGED: list[tuple[KB, Any]] = []  # the last KB judged, held so its id is not reused


class Rejudged:
    """evidence id -> claim -> {"verdict", "scope"}, each record judged again only when first asked for (a
    `kb validate FILE` that cites no evidence judges nothing), from the verdict cache where its inputs are
    unchanged; the probes are imported only for a record the cache does not hold."""

    def __init__(self, kb: KB, cache: Any = None) -> None:
        from kbtool.probe.verdict_cache import Inputs, VerdictCache

        self.kb, self.claims = kb, {c.id: c for c in kb if isinstance(c, Claim)}
        from kbtool.probe.seed import Seed

        self.seed = Seed(kb.root)
        # each probe's judge code (kbtool.probe.judge_code), read once, when first asked, for the seed and the cache
        self.cache = cache if cache is not None else VerdictCache(code=lambda probe: self.seed.code.digest(probe))
        self.inputs = Inputs(kb)
        self._probes: dict[str, Any] | None = None
        self.done: dict[str, dict[str, Any]] = {}

    @property
    def probes(self) -> dict[str, Any]:
        if self._probes is None:
            from kbtool.probe.rejudge import probes_by_id

            self._probes = probes_by_id()
        return self._probes

    def verdicts(self, ev: Evidence) -> list[dict[str, Any]]:
        """Today's verdicts on `ev` as dicts (claim, verdict, scope, detail)."""
        cached = self.cache.get(ev, self.inputs)
        if cached is not None:
            return list(cached)
        from kbtool.probe.verdict_cache import evidence_key

        key = evidence_key(ev)
        seeded = self.seed.get(key, ev.probe.id, self.inputs)
        if seeded is not None:  # shipped with the records, for the same judge code and inputs
            self.cache.put(ev, self.inputs, seeded, **self.seed.reads(key))
            return list(seeded)
        from kbtool.probe.rejudge import reads, rejudge

        again = rejudge(ev, self.claims, self.probes)
        out = [v.model_dump(mode="json") for v in again.verdicts]
        try:
            deps = reads(ev, self.probes.get(ev.probe.id))
        except Exception:  # a probe whose inputs cannot be named is judged again each time, not cached
            return out
        self.cache.put(ev, self.inputs, out, **deps)
        return out

    def get(self, eid: str, default: Any = None) -> Any:
        if eid not in self.done:
            ev = self.kb.get(eid)
            if not isinstance(ev, Evidence):
                return default
            self.done[eid] = {v["claim"]: {"verdict": v["verdict"], "scope": v.get("scope") or {}}
                              for v in self.verdicts(ev)}
        return self.done[eid]


def judged(kb: KB) -> Any:
    """evidence id -> claim -> {"verdict", "scope"}: each record's cases judged by today's probe (kbtool.probe.rejudge;
    the record's own verdicts where its probe cannot judge it again), lazily, once per KB."""
    if not _JUDGED or _JUDGED[0][0] is not kb:
        _JUDGED[:] = [(kb, Rejudged(kb))]
    return _JUDGED[0][1]
