"""The writer changes only a claim's verification block, atomically and under a lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kbtool.errors import WriteError
from kbtool.store.writer import file_lock, splice_verification, update_verification, write_new_record

CLAIMS = Path(__file__).resolve().parents[2] / "records" / "claims"
BLOCK = {
    "status": "disputed",
    "evidence": ["2026-11-30-nvidia-h200-sxm-sdpa-gates"],
    "sides": [{"position": "As stated: x: y, with 'quotes' and # not a comment",
               "sources": [{"type": "probe", "ref": "evidence/2026-11-30-nvidia-h200-sxm-sdpa-gates"}]}],
    "reason": "on",  # a YAML 1.1 boolean when unquoted
    "checked": "2026-11-30",  # a date when unquoted
}

COMMENTED = """\
# A claim with comments everywhere.
id: c1   # trailing comment
kind: claim
name: 'quoted: name'
requires:
  all:
    - {var: head_dim, le: 256}     # indented list, flow leaves
    - {var: head_dim, multiple_of: 8}
verification: {status: unverified,
  evidence: []}
# a comment that belongs to notes
notes: >-
  folded text
  over lines
"""


def outside_lines(text: str) -> tuple[list[str], list[str]]:
    """Lines before and after the verification entry."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("verification:"))
    end = start + 1
    while end < len(lines) and (lines[end][:1] in (" ", "\t") or not lines[end].strip()):
        end += 1
    return lines[:start], lines[end:]


def claim_texts() -> list[tuple[str, str]]:
    files = sorted(CLAIMS.glob("*.yaml"))
    texts = [(f.name, f.read_text()) for f in files]
    texts.append(("commented", COMMENTED))
    texts.append(("verification last, no newline", "id: c2\nkind: claim\nverification:\n  status: unverified"))
    texts.append(("verification first", "verification:\n  status: unverified\n\nid: c3\nkind: claim\n"))
    return texts


@pytest.mark.parametrize(("name", "text"), claim_texts(), ids=[n for n, _ in claim_texts()])
def test_only_the_verification_block_changes(name: str, text: str) -> None:
    if "&" in text.split("verification:")[1].split("\nnotes:")[0]:
        pytest.skip("anchors in the block: covered by test_anchor_shared_with_the_rest_is_refused")
    new = splice_verification(text, BLOCK)
    before, after = outside_lines(text)
    new_before, new_after = outside_lines(new)
    assert new_before == before, name
    assert "".join(new_after).rstrip("\n") == "".join(after).rstrip("\n"), name
    old_data, new_data = yaml.safe_load(text), yaml.safe_load(new)
    assert new_data.pop("verification") == BLOCK
    old_data.pop("verification")
    assert new_data == old_data


def test_missing_block_is_appended() -> None:
    text = "id: c4\nkind: claim\nnotes: x"
    new = splice_verification(text, {"status": "untestable", "reason": "no wheels"})
    assert new.startswith(text + "\n")
    assert yaml.safe_load(new)["verification"] == {"status": "untestable", "reason": "no wheels"}


def test_update_writes_atomically_and_reports_no_change(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(COMMENTED)
    os.chmod(path, 0o640)
    assert update_verification(path, BLOCK) is True
    assert yaml.safe_load(path.read_text())["verification"] == BLOCK
    assert path.stat().st_mode & 0o777 == 0o640
    assert update_verification(path, BLOCK) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]  # no temp or lock files left


def test_a_record_that_does_not_parse_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("id: [unclosed\n")
    with pytest.raises(WriteError):
        update_verification(path, BLOCK)
    assert path.read_text() == "id: [unclosed\n"


def test_new_records_are_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    write_new_record(path, {"id": "e", "kind": "evidence", "started": "2026-11-30T10:00:00Z"})
    assert yaml.safe_load(path.read_text())["started"] == "2026-11-30T10:00:00Z"
    with pytest.raises(WriteError, match="already exists"):
        write_new_record(path, {"id": "other"})
    assert yaml.safe_load(path.read_text())["id"] == "e"


def test_a_held_lock_blocks_a_second_writer(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(COMMENTED)
    with file_lock(path), pytest.raises(WriteError, match="locked"), file_lock(path, timeout=0.2):
        pass
    assert not (tmp_path / ".c.yaml.lock").exists()


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(COMMENTED)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (tmp_path / ".c.yaml.lock").write_text(dead)
    assert update_verification(path, BLOCK) is True


def test_anchor_shared_with_the_rest_is_refused() -> None:
    text = "id: a\nverification:\n  status: disputed\n  sides:\n  - sources:\n    - &id001\n      type: seed\n" \
           "sources:\n- *id001\n"
    with pytest.raises(WriteError, match="anchor &id001"):
        splice_verification(text, BLOCK)
    local = "id: a\nverification:\n  x: &v1 [1]\n  y: *v1\nsources: []\n"
    assert yaml.safe_load(splice_verification(local, BLOCK))["verification"] == BLOCK


def test_verification_keys_follow_the_model_order() -> None:
    from kbtool.model.common import Verification
    from kbtool.store.writer import VERIFICATION_ORDER, splice_verification

    assert tuple(Verification.model_fields) == VERIFICATION_ORDER
    text = "id: c\nkind: claim\nverification: {status: unverified}\nrelated: []\n"
    out = splice_verification(text, {"checked": "2026-11-30", "sides": [], "reason": "r", "status": "verified",
                                     "evidence": ["e"]})
    import yaml

    assert list(yaml.safe_load(out)["verification"]) == ["status", "evidence", "reason", "sides", "checked"]


def test_a_lock_file_hard_linked_elsewhere_is_refused_and_left_alone(tmp_path: Path) -> None:
    """Issue 48: `.c.yaml.lock` as a hard link to a file outside the tree is that file's inode; truncating it or
    writing the pid would destroy the other file."""
    path = tmp_path / "c.yaml"
    path.write_text(COMMENTED)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    lock = tmp_path / ".c.yaml.lock"
    os.link(victim, lock)
    with pytest.raises(WriteError) as e:
        update_verification(path, BLOCK)
    assert str(e.value) == (f"{path}: lock file {lock} has 2 links (a hard link to another file); not written\n"
                            f"  fix: remove {lock} (kb creates it again; the other file is left as it is)")
    assert e.value.exit_code == 2
    assert victim.read_bytes() == b"precious\n"
    assert path.read_text() == COMMENTED
    assert lock.exists()  # not ours to delete


def test_a_lock_file_that_is_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(COMMENTED)
    lock = tmp_path / ".c.yaml.lock"
    os.mkfifo(lock)
    with pytest.raises(WriteError, match=r"is a named pipe \(FIFO\), not a regular file; not written"):
        update_verification(path, BLOCK)
    assert path.read_text() == COMMENTED


@pytest.mark.parametrize("content", ["99999999999999999999", "-5", "-1", "0", "1e9", "abc", "\x00", "4194305"])
def test_a_stale_lock_with_an_absurd_pid_is_taken_over(tmp_path: Path, content: str) -> None:
    """A 20-digit pid ended in OverflowError from os.kill; a negative one asked about a process group."""
    path = tmp_path / "c.yaml"
    path.write_text(COMMENTED)
    (tmp_path / ".c.yaml.lock").write_text(content)
    assert update_verification(path, BLOCK) is True
    assert not (tmp_path / ".c.yaml.lock").exists()
