"""kbtool.paths.display: the short names findings carry."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbtool.paths import Display, display


def test_a_file_is_named_from_the_records_parent(tmp_path: Path) -> None:
    root = tmp_path / "records"
    (root / "claims").mkdir(parents=True)
    f = root / "claims" / "a.yaml"
    f.write_text("x: 1\n")
    assert display(f, root) == "records/claims/a.yaml"
    assert display(root.parent, root) == "."


def test_a_symlink_names_itself_and_a_path_outside_every_base_stays_as_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "tree" / "records"
    root.mkdir(parents=True)
    target = tmp_path / "elsewhere" / "b.yaml"
    target.parent.mkdir()
    target.write_text("x: 1\n")
    link = root / "b.yaml"
    link.symlink_to(target)
    monkeypatch.chdir(tmp_path / "tree")
    name = Display(root)
    assert name(link) == "records/b.yaml"  # not elsewhere/b.yaml
    assert name(Path("/etc/hostname")) == "/etc/hostname"  # under neither base: as given


def test_a_folder_reached_through_a_symlinked_parent_is_named_under_the_real_base(tmp_path: Path) -> None:
    real = tmp_path / "real" / "records"
    real.mkdir(parents=True)
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    f = tmp_path / "alias" / "records" / "c.yaml"
    f.write_text("x: 1\n")
    assert display(f, real) == "records/c.yaml"  # the parent's real path is under the root's parent


def test_the_kind_folders_are_the_models_folders() -> None:
    from kbtool.model import FOLDERS
    from kbtool.paths import KIND_FOLDERS

    assert set(FOLDERS.values()) == KIND_FOLDERS


def test_a_folder_of_something_else_is_refused_before_a_walk(tmp_path: Path) -> None:
    from kbtool.paths import root_problem

    (tmp_path / "cache" / "deep").mkdir(parents=True)
    (tmp_path / "notes.yaml").write_text("x")
    problem = root_problem(str(tmp_path))
    assert problem is not None and "none of the kind folders" in problem[0]
    assert root_problem(str(tmp_path / "cache" / "deep")) is None  # empty: a new tree
    (tmp_path / "claims").mkdir()
    assert root_problem(str(tmp_path)) is None
