"""The query image's cache (kbtool/store/cache.py): used only while fresh and intact, checked in-process."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kbtool import query_cli
from kbtool.store import cache
from tests.util import DATA, run_kb

FIX = DATA / "kb_fixture"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "records"
    shutil.copytree(FIX, root)
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KB_NO_CACHE", raising=False)
    return root


def _builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every time the image is built from the records (instead of read from the cache)."""
    calls: list[str] = []
    real = query_cli.checked_kb

    def spy(root: str) -> object:
        calls.append(root)
        return real(root)

    monkeypatch.setattr(query_cli, "checked_kb", spy)
    return calls


def test_second_query_reads_the_image(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _builds(monkeypatch)
    first = query_cli.image(str(tree))
    second = query_cli.image(str(tree))
    assert len(calls) == 1 and [k.id for k in first.kernels] == [k.id for k in second.kernels]
    assert cache.image_path(str(tree)) is not None and os.path.exists(cache.image_path(str(tree)))  # type: ignore[arg-type]


@pytest.mark.parametrize("change", ["edit", "add", "remove", "schema"])
def test_any_change_to_the_tree_makes_it_stale(tree: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    query_cli.image(str(tree))
    kernel = tree / "kernels" / "k-free.yaml"
    if change == "edit":
        kernel.write_text(kernel.read_text() + "\n")
    elif change == "add":
        shutil.copy(tree / "models" / "fx-gemma.yaml", tree / "models" / "fx-gemma-copy.yml.bak")
    elif change == "remove":
        (tree / "models" / "fx-gemma.yaml").unlink()
    else:  # a schema file: the listing of the schema folder is part of the key
        real = cache.tree_key
        monkeypatch.setattr(cache, "tree_key", lambda root: real(root) + b"schema changed")
    calls = _builds(monkeypatch)
    query_cli.image(str(tree))
    assert len(calls) == 1


def test_the_answer_follows_the_records(tree: Path) -> None:
    args = ["query", "--kb", str(tree), "--gpu", "hop", "--model", "fx-llama-70b", "--ctx", "32k", "--json"]
    before = run_kb(*args, env={"KB_CACHE_DIR": os.environ["KB_CACHE_DIR"]})
    model = tree / "models" / "fx-llama-70b.yaml"
    model.write_text(model.read_text().replace("kv_heads: 8", "kv_heads: 16", 1))
    after = run_kb(*args, env={"KB_CACHE_DIR": os.environ["KB_CACHE_DIR"]})
    assert before.code == after.code == 0 and before.out != after.out


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_a_damaged_image_is_never_used(tree: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    query_cli.image(str(tree))
    path = Path(cache.image_path(str(tree)))  # type: ignore[arg-type]
    raw = path.read_bytes()
    path.write_bytes({"truncate": raw[: len(raw) // 2], "flip": raw[:-10] + bytes([raw[-10] ^ 1]) + raw[-9:],
                      "garbage": b"KB-IMAGE\n" + os.urandom(64), "empty": b""}[damage])
    assert cache.read(str(tree)) is None
    calls = _builds(monkeypatch)
    assert query_cli.image(str(tree)).kernels
    assert len(calls) == 1 and cache.read(str(tree)) is not None  # rebuilt and rewritten


def test_another_trees_image_or_other_code_is_not_used(tree: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    query_cli.image(str(tree))
    other = tmp_path / "other"
    shutil.copytree(tree, other)
    shutil.copy(cache.image_path(str(tree)), cache.image_path(str(other)))  # type: ignore[arg-type]
    assert cache.read(str(other)) is None  # the header names the tree it was built from
    monkeypatch.setattr(cache, "code_key", lambda: b"other code")
    assert cache.read(str(tree)) is None


@pytest.mark.parametrize("off", [{"KB_NO_CACHE": "1"}, {"KB_CACHE_DIR": ""}])
def test_the_cache_can_be_turned_off(tree: Path, monkeypatch: pytest.MonkeyPatch, off: dict[str, str]) -> None:
    for k, v in off.items():
        monkeypatch.setenv(k, v)
    calls = _builds(monkeypatch)
    query_cli.image(str(tree))
    query_cli.image(str(tree))
    assert len(calls) == 2 and cache.image_path(str(tree)) is None


def test_no_cache_option_reads_afresh(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _builds(monkeypatch)
    args = ["--kb", str(tree), "--gpu", "hop", "--json"]
    assert query_cli.main(args) == 0 and query_cli.main([*args, "--no-cache"]) == 0
    assert len(calls) == 2 and query_cli.main(args) == 0 and len(calls) == 2


# ---- issue 48: the cache files are not trusted ------------------------------------------------------------------


def _resealed(path: Path, body: bytes, magic: bytes) -> None:
    """What a tool that knows the format but not the folder's secret writes: a body with a CRC-32 in front."""
    import zlib

    path.write_bytes(magic + zlib.crc32(body).to_bytes(4, "little") + body)


def test_an_image_rewritten_with_a_matching_crc_is_not_used(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import marshal

    query_cli.image(str(tree))
    path = Path(cache.image_path(str(tree)))  # type: ignore[arg-type]
    header, payload = marshal.loads(path.read_bytes()[len(cache.MAGIC) + cache.SEAL:])
    _resealed(path, marshal.dumps((header, payload)), cache.MAGIC)
    assert cache.read(str(tree)) is None
    # a body sealed with another key (a file copied from another cache folder) is refused the same way
    key = (path.parent / cache.SECRET).read_bytes()
    body = marshal.dumps((header, payload))
    path.write_bytes(cache.MAGIC + cache._digest(cache.MAGIC, body, bytes(32)) + body)
    assert cache.read(str(tree)) is None
    path.write_bytes(cache.MAGIC + cache._digest(cache.MAGIC, body, key) + body)
    assert cache.read(str(tree)) == payload  # the check is the seal, not the bytes' origin


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse", "folder", "other-key-mode"])
def test_an_image_that_is_not_a_small_regular_file_is_ignored_and_rebuilt(
        tree: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """A FIFO in place of the image hung `kb query`; /dev/zero or an 8 GiB sparse file was read to the end."""
    query_cli.image(str(tree))
    path = Path(cache.image_path(str(tree)))  # type: ignore[arg-type]
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "sparse":
        with path.open("wb") as f:
            f.truncate(8 << 30)
    elif kind == "folder":
        path.mkdir()
    else:  # a secret others can read could have sealed anything
        query_cli.image(str(tree))
        (path.parent / cache.SECRET).chmod(0o644)
    assert cache.read(str(tree)) is None
    calls = _builds(monkeypatch)
    assert query_cli.image(str(tree)).kernels
    assert len(calls) == 1
    if kind != "folder":  # rebuilt in its place
        assert path.is_file() and not path.is_symlink() and cache.read(str(tree)) is not None


def test_a_fifo_image_does_not_hang_the_cli(tree: Path) -> None:
    import subprocess
    import sys

    args = [sys.executable, "-m", "kbtool", "query", "--kb", str(tree), "--gpu", "hop", "--ctx", "32k"]
    assert subprocess.run(args, capture_output=True, timeout=60).returncode == 0
    path = Path(cache.image_path(str(tree)))  # type: ignore[arg-type]
    path.unlink()
    os.mkfifo(path)
    r = subprocess.run(args, capture_output=True, text=True, timeout=20)  # hung until killed before issue 48
    assert r.returncode == 0 and "Traceback" not in r.stderr
