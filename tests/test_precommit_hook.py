"""The `kb-validate` hook of .pre-commit-hooks.yaml, in a temporary git repository."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GOOD = """\
id: sm90
kind: architecture
name: Hopper
family: hopper
sources:
- {type: doc, url: 'https://example.org/hopper'}
"""
BAD = "id: sm80\nkind: architecture\nname: Ampere\n"  # no family, no sources


def _hook(hook_id: str) -> dict[str, object]:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return next(h for h in hooks if h["id"] == hook_id)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "records" / "architectures").mkdir(parents=True)
    (tmp_path / "records" / "architectures" / "sm90.yaml").write_text(GOOD)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    return tmp_path


def _git_add(repo: Path) -> None:
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)


def _entry_command(hook_id: str, files: list[str]) -> list[str]:
    """The command pre-commit runs for the hook: entry + args + the matching staged files."""
    hook = _hook(hook_id)
    entry = shlex.split(str(hook["entry"]))
    kb = shutil.which("kb", path=str(Path(sys.executable).parent)) or "kb"
    return [kb, *entry[1:], *[str(a) for a in hook.get("args", [])], *files]  # type: ignore[attr-defined]


def test_hook_entry_passes_good_records_and_fails_bad_ones(repo: Path) -> None:
    env = dict(os.environ)  # the session's KB cache (tests/conftest.py)
    ok = subprocess.run(_entry_command("kb-validate", ["records/architectures/sm90.yaml"]), cwd=repo, env=env,
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (repo / "records" / "architectures" / "sm80.yaml").write_text(BAD)
    bad = subprocess.run(_entry_command("kb-validate", ["records/architectures/sm80.yaml"]), cwd=repo, env=env,
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 1 and "records/architectures/sm80.yaml" in bad.stdout


@pytest.mark.slow
@pytest.mark.install
@pytest.mark.usefixtures("shipped_verdicts")
def test_pre_commit_runs_the_hook_in_a_temporary_repository(repo: Path, tmp_path_factory: pytest.TempPathFactory) \
        -> None:
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or shutil.which("pre-commit")
    if pre_commit is None:
        pytest.skip("pre-commit is not installed (pip install pre-commit)")
    home = tmp_path_factory.mktemp("pre-commit-home")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "KB_RECORDS")}
    env |= {"PRE_COMMIT_HOME": str(home)}

    def try_repo() -> subprocess.CompletedProcess[str]:
        _git_add(repo)
        return subprocess.run([pre_commit, "try-repo", str(ROOT), "kb-validate", "--all-files"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=600, check=False)

    ok = try_repo()
    if ok.returncode != 0 and "No matching distribution" in ok.stdout + ok.stderr:
        pytest.skip("the hook's environment cannot be installed offline")
    assert ok.returncode == 0, ok.stdout[-3000:]
    assert "kb validate" in ok.stdout and "Passed" in ok.stdout
    (repo / "records" / "architectures" / "sm80.yaml").write_text(BAD)
    bad = try_repo()
    assert bad.returncode == 1 and "Failed" in bad.stdout and "sm80.yaml" in bad.stdout
