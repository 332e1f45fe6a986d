"""The verdict cache (kbtool.probe.verdict_cache): re-judged verdicts are reused only while what the judge read is
unchanged, and the cache folder is safe to delete or corrupt."""

from __future__ import annotations

from pathlib import Path

from kbtool.kb import KB
from kbtool.model import Claim, Evidence
from kbtool.probe.judged import Rejudged
from kbtool.probe.rejudge import probes_by_id, reads
from kbtool.probe.verdict_cache import Inputs, VerdictCache
from kbtool.store.records import load_tree

RECORDS = Path(__file__).resolve().parents[2] / "records"
EVIDENCE = "2026-11-30-nvidia-h200-sxm-sdpa-gates"


def _records() -> list:  # type: ignore[type-arg]
    return [x.record for x in load_tree(RECORDS, [RECORDS / "claims", RECORDS / "evidence" / f"{EVIDENCE}.yaml"])
            .loaded if x.record is not None]


def _edit(records: list, cid: str, **update: object) -> list:  # type: ignore[type-arg]
    out = []
    for r in records:
        if isinstance(r, Claim) and r.id == cid:
            r = Claim.model_validate({**r.model_dump(mode="json", exclude_defaults=True, by_alias=True), **update})
        out.append(r)
    return out


def _judge(records: list, folder: Path) -> tuple[Rejudged, dict]:  # type: ignore[type-arg]
    kb = KB.from_records(records)
    r = Rejudged(kb, VerdictCache(str(folder), code="test-code"))
    return r, r.get(EVIDENCE)


def test_a_second_run_reads_the_cache_and_says_the_same(tmp_path: Path) -> None:
    records = _records()
    first, got = _judge(records, tmp_path)
    assert (first.cache.hits, first.cache.misses) == (0, 1) and got
    again, same = _judge(records, tmp_path)
    assert (again.cache.hits, again.cache.misses) == (1, 0)
    assert same == got
    assert again._probes is None  # a full hit imports no probe


def test_a_claim_the_judge_reads_changed_judges_again(tmp_path: Path) -> None:
    records = _records()
    _, got = _judge(records, tmp_path)
    cid = sorted(got)[0]
    renamed, _ = _judge(_edit(records, cid, name="another name, same gate"), tmp_path)
    assert renamed.cache.hits == 1  # the judge is not handed a claim's name
    claim = next(r for r in records if isinstance(r, Claim) and r.id == cid)
    reason = {**claim.reason.model_dump(mode="json", exclude_defaults=True), "code": "SOMETHING_ELSE"}
    changed, _ = _judge(_edit(records, cid, reason=reason), tmp_path)
    assert (changed.cache.hits, changed.cache.misses) == (0, 1)


def test_a_new_judge_code_digest_judges_again(tmp_path: Path) -> None:
    records = _records()
    _judge(records, tmp_path)
    kb = KB.from_records(records)
    other = Rejudged(kb, VerdictCache(str(tmp_path), code="other-code"))
    other.get(EVIDENCE)
    assert other.cache.misses == 1
    again = Rejudged(kb, VerdictCache(str(tmp_path), code="other-code"))
    again.get(EVIDENCE)
    assert (again.cache.hits, again.cache.misses) == (1, 0)  # the entry was rewritten for the new code


def test_the_key_is_the_judges_own_code_not_all_of_kbtool(tmp_path: Path) -> None:
    """Issue 43: an edit to a module no judge reaches (a solver module) keeps every entry; each entry is keyed by
    the digest of its own probe's judge code (kbtool.probe.judge_code), and a probe whose code cannot be found is
    not cached."""
    records = _records()
    kb = KB.from_records(records)
    ev = kb.get(EVIDENCE)
    assert isinstance(ev, Evidence)
    asked: list[str] = []

    def code(probe: str) -> str:
        asked.append(probe)
        return f"judge of {probe}"

    first = Rejudged(kb, VerdictCache(str(tmp_path), code=code))
    first.get(EVIDENCE)
    assert asked and set(asked) == {ev.probe.id}
    again = Rejudged(kb, VerdictCache(str(tmp_path), code=code))
    again.get(EVIDENCE)
    assert again.cache.hits == 1
    changed = Rejudged(kb, VerdictCache(str(tmp_path), code=lambda probe: f"edited judge of {probe}"))
    changed.get(EVIDENCE)
    assert changed.cache.misses == 1
    none = Rejudged(kb, VerdictCache(str(tmp_path / "none"), code=lambda probe: None))
    none.get(EVIDENCE)
    assert not (tmp_path / "none" / "verdicts").exists()  # nothing written without a judge digest


def test_folders_of_the_old_layout_are_removed(tmp_path: Path) -> None:
    old = tmp_path / "verdicts" / ("0" * 32)
    old.mkdir(parents=True)
    (old / "x.json").write_text("{}")
    _judge(_records(), tmp_path)
    assert [p.name for p in (tmp_path / "verdicts").iterdir()] == ["v2"]


def test_a_solver_edit_reaches_no_judge() -> None:
    """The module the bench edits (`validate solver edit`) is in no judge's code, so such an edit judges nothing
    again; a judge module's own file is in its code."""
    from kbtool.probe.judge_code import KBTOOL, JudgeCode

    code = JudgeCode()
    solver = KBTOOL / "solve" / "decision.py"
    assert code.modules
    for probe, mod in code.modules.items():
        files = code.files(probe)
        assert solver not in files, probe
        assert KBTOOL.joinpath(*mod.split(".")[1:]).with_suffix(".py") in files


def test_a_corrupt_entry_reads_as_absent(tmp_path: Path) -> None:
    records = _records()
    first, got = _judge(records, tmp_path)
    ev = KB.from_records(records).get(EVIDENCE)
    assert isinstance(ev, Evidence)
    path = first.cache.path(ev)
    assert path is not None and path.is_file()
    path.write_text("{not json")
    again, same = _judge(records, tmp_path)
    assert again.cache.misses == 1 and same == got


def test_the_vllm_selector_names_what_its_judge_reads() -> None:
    kb = KB.from_records([x.record for x in load_tree(RECORDS, [RECORDS / "evidence"]).loaded if x.record])
    ev = next(e for e in kb.of_kind("evidence", Evidence) if e.probe.id == "vllm-selector")
    deps = reads(ev, probes_by_id()["vllm-selector"])
    assert deps["kinds"] == ["engine-backend"]
    assert deps["files"] and all(Path(f).is_file() for f in deps["files"])
    assert "vllm-flashinfer" in deps["subjects"]


def test_inputs_digest_changes_with_the_gate_of_a_claim_of_the_subject() -> None:
    records = _records()
    claim = next(r for r in records if isinstance(r, Claim))
    before = Inputs(records).subjects([claim.subject])
    after = Inputs(_edit(records, claim.id, statement="a different statement")).subjects([claim.subject])
    assert before != after
    status = {"status": "untestable", "reason": "a status apply writes"}
    assert Inputs(_edit(records, claim.id, notes="n", verification=status)).subjects([claim.subject]) == before


def test_an_edited_entry_is_judged_again_not_trusted(tmp_path: Path) -> None:
    """Issue 48: an entry whose verdicts were rewritten (digests of its reads left as they were) changed the answer;
    the seal (kb's version, keyed by the cache folder's secret) now refuses it, and a FIFO in its place does not
    hang."""
    import json
    import os

    records = _records()
    first, got = _judge(records, tmp_path)
    ev = KB.from_records(records).get(EVIDENCE)
    assert isinstance(ev, Evidence)
    path = first.cache.path(ev)
    assert path is not None
    entry = json.loads(path.read_bytes()[32:])
    entry["verdicts"] = [{**v, "verdict": "refuted"} for v in entry["verdicts"]]
    path.write_bytes(path.read_bytes()[:32] + json.dumps(entry, sort_keys=True).encode())
    again, same = _judge(records, tmp_path)
    assert again.cache.misses == 1 and same == got
    path.unlink()
    os.mkfifo(path)
    third, same = _judge(records, tmp_path)
    assert third.cache.misses == 1 and same == got
