"""kbtool.store.untrusted: the one reader for files kb did not write, and the records-tree walk."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kbtool.store import untrusted
from kbtool.store.reader import load_yaml
from kbtool.store.records import discover, load_tree
from kbtool.store.untrusted import UntrustedInputError, load_json, read_bytes


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = _fifo(tmp_path / "config.json")
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(untrusted.os, "open", lambda p, *a: opened.append(str(p)) or real_open(p, *a))
    t = time.monotonic()
    with pytest.raises(UntrustedInputError) as exc:
        load_json(pipe, given="given/config.json")
    assert time.monotonic() - t < 1
    assert opened == []
    assert str(exc.value.args[0]) == "given/config.json: is a named pipe (FIFO), not a regular file; not read"
    assert exc.value.exit_code == 2


@pytest.mark.parametrize("make,kind", [(lambda p: p.mkdir(), "a folder"),
                                       (lambda p: p.symlink_to("/dev/null"), "a character device")])
def test_folders_and_devices_are_refused(tmp_path: Path, make, kind: str) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "x.json"
    make(p)
    with pytest.raises(UntrustedInputError, match=f"is {kind}, not a regular file"):
        read_bytes(p)


def test_size_limit(tmp_path: Path) -> None:
    p = tmp_path / "big.json"
    p.write_bytes(b"[" + b"1," * 100 + b"1]")
    with pytest.raises(UntrustedInputError, match="the limit is 50"):
        read_bytes(p, limit=50)
    assert read_bytes(p, limit=1000).startswith(b"[1,")


@pytest.mark.parametrize("text,what", [
    ('{"x": 1e400}', "out of range"), ('{"x": NaN}', "NaN is not a number JSON allows"),
    ('{"x": -Infinity}', "-Infinity is not a number"), ('{"x": ' + "9" * 5000 + "}", "5,000 digits"),
    ("[" * 5000 + "]" * 5000, "not readable JSON"), ('{"x": 1,}', "not valid JSON"),
])
def test_json_numbers_and_shape(tmp_path: Path, text: str, what: str) -> None:
    p = tmp_path / "c.json"
    p.write_text(text)
    with pytest.raises(UntrustedInputError, match=what):
        load_json(p)


def test_json_depth_limit_below_the_recursion_limit(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_text("[" * 80 + "]" * 80)
    with pytest.raises(UntrustedInputError, match="nesting deeper than 64"):
        load_json(p)


def test_not_utf8(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    p.write_bytes(b'{"name": "\xff"}')
    with pytest.raises(UntrustedInputError, match=r"c.json:1: not UTF-8: byte 0xff"):
        load_json(p)


def test_yaml_alias_bomb_and_infinity(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 8)]
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(UntrustedInputError, match="alias bomb"):
        load_yaml(bomb)
    inf = tmp_path / "inf.yaml"
    inf.write_text("factor: .inf\n")
    with pytest.raises(UntrustedInputError, match=r"\$.factor: inf is not a finite number"):
        load_yaml(inf)


def test_symlink_out_of_the_root_names_the_given_path(tmp_path: Path) -> None:
    (tmp_path / "out.json").write_text("{}")
    root = tmp_path / "tree"
    root.mkdir()
    (root / "link.json").symlink_to(tmp_path / "out.json")
    with pytest.raises(UntrustedInputError) as exc:
        load_json(root / "link.json", given="tree/link.json", root=root)
    assert exc.value.args[0].startswith("tree/link.json: resolves to ")
    assert load_json(root / "link.json") == {}  # without a root, a link is followed


def test_walk_reports_fifo_and_symlinked_folder_leaving_the_tree(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "m.yaml").write_text("id: m\n")
    root = tmp_path / "records"
    (root / "models").mkdir(parents=True)
    (root / "models" / "ok.yaml").write_text("id: ok\n")
    _fifo(root / "models" / "pipe.yaml")
    (root / "models" / "linked").symlink_to(outside)
    (root / "inside").symlink_to(root / "models")  # a link that stays in the tree is followed once
    (root / "loop").symlink_to(root)
    t = time.monotonic()
    files, findings = discover([root], root)
    assert time.monotonic() - t < 1
    assert files == [root / "models" / "ok.yaml"]
    msgs = sorted(f"{f.file}: {f.message}" for f in findings)
    assert msgs == [f"records/models/linked: symlinked folder leaves the records tree (to {outside}); not read",
                    "records/models/pipe.yaml: is a named pipe (FIFO), not a regular file; not read"]


def test_symlinked_record_finding_names_the_link(tmp_path: Path) -> None:
    root = tmp_path / "records"
    (root / "claims").mkdir(parents=True)
    (root / "real.yaml").write_text("id: [unclosed\n")
    (root / "claims" / "alias.yaml").symlink_to(root / "real.yaml")
    result = load_tree(root, [root / "claims"])
    assert [f.file for f in result.findings] == ["records/claims/alias.yaml"]
