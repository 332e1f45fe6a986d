"""An evidence record is judged against the grid its run wrote, never against the one a later run of the same
release put at the same path (kbtool.probe.recorded; issue 46's re-sweep changed 15 records' verdicts so)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbtool.model import Evidence
from kbtool.probe import campaign, seed
from kbtool.probe.evidence import load as load_evidence
from kbtool.probe.judges import vllm_selector as vs_judge
from kbtool.probe.recorded import (
    STORE,
    SUPERSEDED,
    GridSuperseded,
    keep_superseded,
    kept_copy,
    resolved,
    verified,
)
from kbtool.probe.rejudge import observations, probes_by_id, rejudged
from probes import vllm_selector as vs
from tests.util import ROOT

EVIDENCE = ROOT / "records" / "evidence"
VLLM = ROOT / "tests" / "data" / "vllm"
# vLLM 0.26.0 probed with grid version 3 (2026-12-02), then again with version 5 (2026-12-07), whose grids, with the
# has_sliding_window axis, replaced version 3's at the same paths
OLD = EVIDENCE / "2026-12-02-no-gpu-vllm-0-26-0-vllm-selector.yaml"
NEW = EVIDENCE / "2026-12-07-no-gpu-vllm-0-26-0-vllm-selector.yaml"
pytestmark = pytest.mark.skipif(not OLD.exists() or not NEW.exists(), reason="no recorded vLLM 0.26.0 evidence")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verdicts(obs: list[dict[str, Any]]) -> dict[str, str]:
    return {v["claim"]: v["verdict"] for v in vs_judge.judge(obs, {})}


def test_verified_reads_the_file_while_it_holds_the_digest_else_the_kept_copy(tmp_path: Path) -> None:
    grid = tmp_path / "0.1.0" / "cc9.0.json.gz"
    grid.parent.mkdir()
    grid.write_bytes(b"first run")
    first = sha(grid)
    assert verified(grid, first) == grid
    assert verified(grid, None) == grid  # no digest named (observations a test builds): read as named
    grid.write_bytes(b"second run")  # a later run of the release, with no copy kept
    with pytest.raises(GridSuperseded, match=SUPERSEDED):
        verified(grid, first)
    assert resolved(grid, first) == grid
    kept = kept_copy(grid, first)
    assert kept == grid.parent / STORE / f"{first}-cc9.0.json.gz"
    kept.parent.mkdir()
    kept.write_bytes(b"not the first run")  # a copy under the digest that does not hold it is not read
    with pytest.raises(GridSuperseded):
        verified(grid, first)
    kept.write_bytes(b"first run")
    assert verified(grid, first) == kept == resolved(grid, first)
    assert verified(grid, sha(grid)) == grid


def test_keep_superseded_copies_the_grid_under_its_digest(tmp_path: Path) -> None:
    grid = tmp_path / "cc8.0.json.gz"
    assert keep_superseded(grid) is None
    grid.write_bytes(b"run one")
    kept = keep_superseded(grid)
    assert kept == kept_copy(grid, sha(grid)) and kept.read_bytes() == b"run one"
    assert keep_superseded(grid) == kept and sorted(p.name for p in kept.parent.iterdir()) == [kept.name]


def test_the_probe_keeps_the_grid_a_new_grid_version_replaces(tmp_path: Path) -> None:
    """probes/vllm_selector.py keep_or_copy: the same grid leaves the file alone; another one is written over it
    only after the old one is kept, and the old record's case then still reads its own grid."""
    new_grid = VLLM / "0.26.0" / "cc9.0.json.gz"
    old_grid = kept_copy(new_grid, _sha_of(OLD, "9.0"))
    dest = tmp_path / "0.26.0" / "cc9.0.json.gz"
    vs.keep_or_copy(old_grid, dest)
    first = sha(dest)
    vs.keep_or_copy(old_grid, dest)  # the same grid again: nothing kept, nothing rewritten
    assert not (dest.parent / STORE).exists() and sha(dest) == first
    vs.keep_or_copy(new_grid, dest)
    assert sha(dest) == sha(new_grid)
    assert verified(dest, first) == kept_copy(dest, first) and sha(kept_copy(dest, first)) == first


def test_a_campaign_keeps_the_grid_it_writes_over(tmp_path: Path) -> None:
    root, out = tmp_path / "root", tmp_path / "out"
    grid = root / "tests" / "data" / "vllm" / "0.1.0" / "cc9.0.json.gz"
    grid.parent.mkdir(parents=True)
    out.mkdir()
    grid.write_bytes(b"earlier run")
    earlier = sha(grid)
    task = campaign.Task("release-0.1.0", "release", release="0.1.0", probe="vllm-selector")
    campaign._write(out, root, task, {"tests/data/vllm/0.1.0/cc9.0.json.gz": b"earlier run"})
    assert not (grid.parent / STORE).exists()  # the same bytes: nothing to keep
    campaign._write(out, root, task, {"tests/data/vllm/0.1.0/cc9.0.json.gz": b"this run"})
    assert grid.read_bytes() == b"this run" and kept_copy(grid, earlier).read_bytes() == b"earlier run"


def _sha_of(path: Path, cc: str) -> str:
    rec = yaml.safe_load(path.read_text(encoding="utf-8"))
    (case,) = [c for c in rec["cases"] if c["params"]["cc"] == cc]
    return str(case["metrics"]["sha256"])


def test_an_old_record_is_judged_against_its_own_grid_not_the_one_that_replaced_it() -> None:
    """The version-3 record of 0.26.0 names the same paths as the version-5 one. Read by path alone, its cases
    would be judged against the version-5 grids and confirm the sliding-window claims, whose points only version 5
    asks; read by digest they are judged against the grids it wrote, where those claims are tested nowhere."""
    old, new = load_evidence(OLD), load_evidence(NEW)
    cases = observations(old)
    assert {c["metrics"]["raw"] for c in cases} == {c["metrics"]["raw"] for c in observations(new)}
    assert all(sha(ROOT / c["metrics"]["raw"]) != c["metrics"]["sha256"] for c in cases)  # each grid was replaced
    by_path = [{**c, "metrics": {k: v for k, v in c["metrics"].items() if k != "sha256"}} for c in cases]
    as_run = verdicts(cases)
    replaced = verdicts(by_path)
    assert replaced == verdicts(observations(new))  # by path: the new record's verdicts, whatever the old one ran
    changed = {c for c in as_run if as_run[c] != replaced.get(c)}
    assert changed and all(c.endswith("-no-sliding-window") for c in changed)
    assert all(as_run[c] == "inconclusive" and replaced[c] == "confirmed" for c in changed)
    # the files read are the kept copies of the digests the record names, and the verdict cache is keyed by them
    files = vs_judge.judge_inputs(cases)["files"]
    assert files == [str(kept_copy(ROOT / c["metrics"]["raw"], c["metrics"]["sha256"])) for c in cases]
    kept = [{**c, "metrics": {**c["metrics"], "raw": f, "sha256": None}} for c, f in zip(cases, files, strict=True)]
    assert verdicts(kept) == as_run


def test_a_replaced_grid_with_no_copy_never_changes_the_records_verdicts(tmp_path: Path) -> None:
    """Grid replaced under a record, and no copy kept: the record is not judged again; it keeps the verdicts it
    carries and says why. With the copy back, it is judged again, as before the grid was replaced."""
    ev = load_evidence(NEW)
    cases = []
    for c in ev.cases:
        src = ROOT / str(c.metrics["raw"])
        dest = tmp_path / "0.26.0" / src.name
        dest.parent.mkdir(exist_ok=True)
        shutil.copyfile(src, dest)
        cases.append(c.model_copy(update={"metrics": {**c.metrics, "raw": str(dest)}}))
    ev = ev.model_copy(update={"cases": cases})
    probes = {k: p for k, p in probes_by_id().items() if k == vs_judge.SPEC.id}
    judged, why = rejudged(ev, {}, probes)
    assert why is None
    before = [v.model_dump(mode="json") for v in judged.verdicts]
    grid = Path(str(ev.cases[0].metrics["raw"]))
    shutil.copyfile(VLLM / "0.25.1" / grid.name, grid)  # another run's grid at the record's path
    kept, why = rejudged(ev, {}, probes)
    assert kept is ev and why is not None and SUPERSEDED in why and grid.name in why
    entry = seed.entry(ev.id, "code", {"files": {}}, [v.model_dump(mode="json") for v in kept.verdicts], why)
    assert seed.held({"k": entry}) == {ev.id: why}
    kept_copy(grid, str(ev.cases[0].metrics["sha256"])).parent.mkdir()
    shutil.copyfile(ROOT / str(load_evidence(NEW).cases[0].metrics["raw"]),
                    kept_copy(grid, str(ev.cases[0].metrics["sha256"])))
    again, why = rejudged(ev, {}, probes)
    assert why is None and [v.model_dump(mode="json") for v in again.verdicts] == before


def _grid_cases() -> list[tuple[str, str, str]]:
    out = []
    for path in sorted(EVIDENCE.glob("*-vllm-*selector*.yaml")):
        rec = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        for c in rec.get("cases") or []:
            m = c.get("metrics") or {}
            if m.get("raw"):
                out.append((str(rec["id"]), str(m["raw"]), str(m.get("sha256") or "")))
    return out


def test_every_recorded_selector_grid_is_there_as_its_run_wrote_it() -> None:
    """Every case of the selector probes' evidence names its grid's digest, and the checkout holds those bytes (at
    the path, or kept under superseded/ when a later run replaced them); every kept copy is one a record names."""
    cases = _grid_cases()
    assert cases
    missing = [(eid, raw) for eid, raw, digest in cases if not digest]
    assert not missing, f"cases that name no sha256: {missing[:3]}"
    gone = []
    for eid, raw, digest in cases:
        try:
            verified(ROOT / raw, digest)
        except GridSuperseded:
            gone.append(f"{eid}: {raw}")
    assert not gone, f"grids replaced with no copy kept (python probes/_restore_superseded.py): {gone[:3]}"
    named = {kept_copy(ROOT / raw, digest) for _, raw, digest in cases}
    stored = set(VLLM.glob(f"*/{STORE}/*"))
    assert stored <= named, f"kept grids no record names: {sorted(map(str, stored - named))[:3]}"
    assert all(sha(p) == p.name.split("-", 1)[0] for p in stored)


def test_model_cases_keep_their_digest() -> None:
    """The digest rides in the case's metrics through the model (observations hand it to the judge)."""
    ev = load_evidence(OLD)
    assert isinstance(ev, Evidence)
    assert all(o["metrics"].get("sha256") for o in observations(ev))
