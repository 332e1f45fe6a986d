"""Write-back safety: SIGKILL at sampled points leaves every record old or new; concurrent writers lose nothing;
a read-only tree gives a clear error."""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kbtool.errors import WriteError
from kbtool.probe.commands import apply_updates, load_claims
from kbtool.probe.evidence import load as load_evidence
from kbtool.probe.verdicts import plan
from kbtool.store.writer import splice_verification, update_verification
from tests.util import RECORDS, ROOT, run_kb

pytestmark = pytest.mark.slow


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _tree_with_unapplied_claims(tmp: Path) -> Path:
    """A copy of the shipped claims and evidence, with every probe-set status reset to unverified. The vLLM
    selector's and SGLang resolver's evidence is left out (their grids alone take longer than the rest) and of the
    others one in two is kept: the test samples write-backs; more records are more of the same."""
    root = tmp / "records"
    shutil.copytree(RECORDS / "claims", root / "claims")
    shutil.copytree(RECORDS / "engine-backends", root / "engine-backends")  # the engine judges' cache keys read them
    shutil.copytree(RECORDS / "engine-priorities", root / "engine-priorities")  # apply judges an engine release's
    # evidence only where the tree records its resolution (kbtool/probe/unrecorded.py)
    keep = [p.name for p in sorted((RECORDS / "evidence").glob("*.yaml"))
            if "vllm-selector" not in p.name and "sglang-resolve" not in p.name][::2]
    shutil.copytree(RECORDS / "evidence", root / "evidence", ignore=lambda _d, names: [
        n for n in names if n.endswith(".yaml") and n not in keep])
    for p in (root / "claims").glob("*.yaml"):
        text = p.read_text()
        data = yaml.load(text, Loader=yaml.CSafeLoader)
        if data.get("verification", {}).get("evidence"):
            p.write_text(splice_verification(text, {"status": "unverified"}))
    return root


def _kill_at(cmd: list[str], delay: float) -> None:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _check_old_or_new(root: Path, old: dict[str, bytes], new: dict[str, bytes]) -> None:
    now = _snapshot(root)
    records = {k for k in now if k.endswith(".yaml") and not Path(k).name.startswith(".")}
    assert {k for k in old if k.endswith(".yaml")} <= records, "record files vanished"
    assert records <= set(old) | set(new), "files appeared that the full run does not write"
    for k in records:  # an existing record is old or new; a new record (measurements) is whole
        assert now[k] in (old.get(k), new.get(k)), f"{k} is neither the old nor the new version"
    for k in set(old) - records:
        assert now.get(k) == old[k], f"{k} changed"
    leftovers = set(now) - set(old) - records
    assert all(Path(k).name.startswith(".") and k.endswith((".tmp", ".lock")) for k in leftovers), leftovers


@pytest.mark.usefixtures("shipped_verdicts")
@pytest.mark.parametrize("command", ["probe-apply", "fmt"])
def test_sigkill_leaves_every_record_old_or_new(tmp_path: Path, command: str) -> None:
    random.seed(7)
    root = _tree_with_unapplied_claims(tmp_path)
    if command == "fmt":
        for i, p in enumerate(sorted((root / "claims").glob("*.yaml"))):  # drop the schema line: kb fmt puts it
            if i % 8:  # back; a sample of the claims (one in eight) is enough to kill it mid-write
                p.unlink()
            else:
                p.write_text("".join(p.read_text().splitlines(keepends=True)[1:]))
        cmd = [sys.executable, "-m", "kbtool", "fmt", "--kb", str(root), str(root / "claims")]
    else:
        cmd = [sys.executable, "-m", "kbtool", "probe", "apply", str(root / "evidence"), "--write", "--kb", str(root)]
    old = _snapshot(root)
    t = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    full = time.monotonic() - t
    new = _snapshot(root)
    changed = [k for k in old if old[k] != new[k]]
    assert len(changed) >= 10, "the command must rewrite files for the test to mean anything"
    for k in changed:  # what a killed run may leave is byte-equal to the old or to these, all of them YAML
        yaml.load(new[k], Loader=yaml.CSafeLoader)
    for i in range(1, 5):  # four kill points spread over the run (reading, then each part of the writing)
        for k, v in old.items():
            (root / k).write_bytes(v)
        _kill_at(cmd, full * (0.2 + 0.8 * i / 5) * random.uniform(0.95, 1.05))
        _check_old_or_new(root, old, new)


@pytest.mark.parametrize("rebase", [True, False])
def test_a_stale_plan_is_rebased_not_lost(tmp_path: Path, rebase: bool) -> None:
    """Writer B plans from an old read; writer A lands first; B's write keeps A's change (and would not
    without the rebase, which is what makes this test able to fail)."""
    root = _tree_with_unapplied_claims(tmp_path)
    ev_path = sorted((root / "evidence").glob("*-fa4-arch.yaml"))[0]  # the first fa4-arch run
    evidence = [load_evidence(ev_path)]
    claims = load_claims(root)
    updates, _ = plan(evidence, {k: c for k, (c, _) in claims.items()}, "2026-11-30")
    (u,) = [u for u in updates if u.claim == "fa4-fp8-sm100-only"]
    target = claims[u.claim][1]
    update_verification(target, {"status": "verified", "evidence": ["writer-a-evidence"], "checked": "2026-11-29"})
    replan = (lambda c: plan(evidence, {c.id: c}, "2026-11-30")[0][0]) if rebase else None
    apply_updates([u], claims, replan)
    final = yaml.safe_load(target.read_text())["verification"]
    assert ev_path.stem in final["evidence"]
    assert ("writer-a-evidence" in final["evidence"]) is rebase


def _hammer(path: str, tag: str, n: int) -> None:
    for i in range(n):
        update_verification(Path(path), lambda d, i=i: {**d["verification"],
                                                         "evidence": [*d["verification"].get("evidence", []),
                                                                      f"{tag}-{i}"]})


def test_two_concurrent_writers_lose_no_update(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("# keep me\nid: c\nkind: claim\nverification:\n  status: unverified\n")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(str(p), tag, 25)) for tag in ("a", "b")]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(60)
    got = yaml.safe_load(p.read_text())["verification"]["evidence"]
    assert sorted(got) == sorted([f"a-{i}" for i in range(25)] + [f"b-{i}" for i in range(25)])
    assert p.read_text().startswith("# keep me\n")


def test_read_only_tree_gives_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "records" / "claims"
    root.mkdir(parents=True)
    shutil.copy(RECORDS / "claims" / "fa2-requires-sm80.yaml", root)
    f = root / "fa2-requires-sm80.yaml"
    f.write_text("".join(f.read_text().splitlines(keepends=True)[1:]))
    if os.geteuid() == 0:  # root ignores permission bits: make the write itself fail as on a read-only tree
        def deny(*a: object, **k: object) -> None:
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr("tempfile.mkstemp", deny)
    else:
        root.chmod(0o555)
    r = run_kb("fmt", "--kb", str(root.parent), str(root))
    root.chmod(0o755)
    assert r.code == 2, r.out + r.err
    assert "Permission denied" in r.err and "Traceback" not in r.err
    with pytest.raises(WriteError):
        update_verification(f, {"status": "unverified"})
