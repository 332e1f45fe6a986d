"""The re-judged verdicts shipped beside the records (kbtool/probe/seed.py): a fresh clone's `kb validate` reads them
instead of judging, each entry only while its judge's code and everything the judge read are unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool.kb import load_kb
from kbtool.model import Claim, Evidence
from kbtool.probe import seed as seeds
from kbtool.probe.judge_code import JudgeCode
from kbtool.probe.judged import Rejudged
from kbtool.probe.verdict_cache import Inputs, VerdictCache, evidence_key
from tests.util import RECORDS


@pytest.fixture(scope="module")
def kb() -> Any:
    return load_kb(RECORDS)[0]


def test_every_judged_record_is_answered_from_the_shipped_seed(kb: Any) -> None:
    """No cache: each evidence record a probe can judge again is a seed hit (run `kb probe seed --write` after
    an edit that reaches a judge, and commit the file)."""
    r = Rejudged(kb, cache=VerdictCache(base=""))
    shipped = seeds.Seed(RECORDS).entries()
    judged = [ev for ev in kb if isinstance(ev, Evidence) and evidence_key(ev) in shipped]
    assert len(judged) >= 100
    missing = []
    for ev in judged:
        before = r.seed.hits
        r.verdicts(ev)
        if r.seed.hits == before:
            missing.append(ev.id)
    assert missing == []


def test_a_seed_hit_is_kept_in_the_local_cache(kb: Any, tmp_path: Any) -> None:
    """The next run answers the record from the local verdict cache and does not read the seed again."""
    ev = next(e for e in sorted((e for e in kb if isinstance(e, Evidence)), key=lambda e: e.id)
              if e.probe.id == "vllm-selector")
    first = Rejudged(kb, cache=VerdictCache(base=str(tmp_path)))
    verdicts = first.verdicts(ev)
    assert first.seed.hits == 1 and first.cache.misses == 1
    second = Rejudged(kb, cache=VerdictCache(base=str(tmp_path)))
    assert second.verdicts(ev) == verdicts
    assert second.cache.hits == 1 and second.seed.hits == 0


def test_an_entry_misses_when_its_judge_or_its_inputs_change(kb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = next(e for e in sorted((e for e in kb if isinstance(e, Evidence)), key=lambda e: e.id)
              if e.probe.id == "vllm-selector")
    s = seeds.Seed(RECORDS)
    key = evidence_key(ev)
    assert s.get(key, ev.probe.id, Inputs(kb)) is not None
    entry = s.entries()[key]
    claim_id = entry["reads"]["claims"][0] if entry["reads"]["claims"] else None
    edited = []
    for rec in kb:  # one claim the judge is handed, with another `requires`: the entry must miss
        if isinstance(rec, Claim) and rec.id == claim_id:
            rec = rec.model_copy(update={"requires": None if rec.requires is not None else rec.when})
        edited.append(rec)
    if claim_id is not None:
        assert seeds.Seed(RECORDS).get(key, ev.probe.id, Inputs(edited)) is None
    monkeypatch.setattr(JudgeCode, "digest", lambda self, pid: "another judge")
    assert seeds.Seed(RECORDS).get(key, ev.probe.id, Inputs(kb)) is None


def test_stale_names_missing_and_changed_entries(tmp_path: Any) -> None:
    entries = {"k1": {"evidence": "ev-a", "code": "c", "reads": {}, "verdicts": []},
               "k2": {"evidence": "ev-b", "code": "c", "reads": {}, "verdicts": []}}
    (tmp_path / seeds.NAME).write_bytes(seeds.dump({"k1": entries["k1"], "k3": {"evidence": "ev-c"}}))
    assert seeds.stale(tmp_path, entries) == ["ev-b", "ev-c"]
    assert seeds.dump(entries) == seeds.dump(dict(reversed(entries.items())))  # stable bytes
