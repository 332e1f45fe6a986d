"""The parsed-file cache (kbtool.store.doc_cache): a file is parsed again only when its bytes change."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbtool.store.doc_cache import DocCache
from kbtool.store.reader import read_document

RECORD = "id: a\nkind: architecture\nname: A\nlist:\n  - x: 1\n    y: [1.5, .inf]\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KB_NO_CACHE", raising=False)
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "a.yaml").write_text(RECORD)
    return tmp_path / "records"


def _read(tree: Path) -> tuple[DocCache, object, object]:
    docs = DocCache(tree)
    doc, problems = docs.read(tree / "a.yaml", "a.yaml")
    docs.save()
    return docs, doc, problems


def test_an_unchanged_file_is_not_parsed_again_and_reads_the_same(tree: Path) -> None:
    first, doc, _ = _read(tree)
    second, again, problems = _read(tree)
    assert (first.misses, second.misses) == (1, 0) and problems == []
    plain, _ = read_document(tree / "a.yaml", "a.yaml")
    assert again.data == doc.data == plain.data  # type: ignore[union-attr]
    assert again.packed is not None and not again.lines  # type: ignore[union-attr]  # unpacked on demand
    assert {p: again.line_of(p) for p in plain.lines} == plain.lines  # type: ignore[union-attr]


def test_an_edit_parses_again(tree: Path) -> None:
    _read(tree)
    (tree / "a.yaml").write_text(RECORD.replace("name: A", "name: B"))
    docs, doc, _ = _read(tree)
    assert docs.misses == 1 and doc.data["name"] == "B"  # type: ignore[union-attr]


def test_a_bad_file_is_not_stored_and_keeps_its_finding(tree: Path) -> None:
    (tree / "a.yaml").write_text("id: a\nid: b\n")
    for _ in range(2):
        docs, doc, problems = _read(tree)
        assert doc is None and "duplicate key" in problems[0].message and docs.misses == 1  # type: ignore[index]


def test_a_corrupt_cache_file_reads_as_empty(tree: Path) -> None:
    first, _, _ = _read(tree)
    assert first.path is not None
    first.path.write_bytes(first.path.read_bytes()[:-3] + b"xyz")
    docs, doc, _ = _read(tree)
    assert docs.misses == 1 and doc.data["id"] == "a"  # type: ignore[union-attr]


@pytest.mark.parametrize("text, clean", [
    ("id: a\nkind: architecture\nname: A\n", True),
    (RECORD, False),  # .inf
    ('id: a\nkind: architecture\nname: "A\\e]0;t"\n', False),  # ESC through a YAML escape
    ('id: a\nkind: architecture\n"k\\x9b": 1\n', False),  # C1 in a key
])
def test_the_clean_flag_is_kept_through_the_cache(tree: Path, text: str, clean: bool) -> None:
    """The NaN and control-character checks skip a file only when its reader saw neither (store.reader)."""
    (tree / "a.yaml").write_text(text)
    _, doc, _ = _read(tree)
    second, again, _ = _read(tree)
    assert second.misses == 0 and doc.clean is clean and again.clean is clean  # type: ignore[union-attr]


def test_a_copy_of_a_validated_tree_starts_from_its_cache_and_keeps_its_own(
        tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from kbtool.store import doc_cache

    monkeypatch.setattr(doc_cache, "SEED_AFTER", 1)  # the first miss reads the other tree's file
    _read(tree)
    copy = tree.parent / "copy" / "records"
    shutil.copytree(tree, copy)
    (copy / "b.yaml").write_text(RECORD.replace("id: a", "id: b"))
    docs = DocCache(copy)
    assert docs.path != DocCache(tree).path  # one file per tree
    docs.read(copy / "a.yaml", "a.yaml")
    docs.read(copy / "b.yaml", "b.yaml")
    docs.save()
    assert docs.misses == 1  # a.yaml from the other tree's file: only the new file is parsed
    again = DocCache(copy)
    again.read(copy / "b.yaml", "b.yaml")
    assert again.misses == 0 and len(again.old) == 2  # its own file now


def test_a_small_new_tree_does_not_read_another_trees_cache(tree: Path) -> None:
    _read(tree)
    other = tree.parent / "small" / "records"
    other.mkdir(parents=True)
    (other / "a.yaml").write_text(RECORD)
    docs = DocCache(other)
    docs.read(other / "a.yaml", "a.yaml")
    assert docs.misses == 1 and docs.seed  # fewer misses than SEED_AFTER: parsed, the other file left unread


def test_an_entry_rewritten_with_a_matching_crc_is_not_trusted(tree: Path) -> None:
    """Issue 48: an entry rewritten in place (the file's CRC-32 recomputed) made `kb validate` report a schema error
    in a record that is fine. The file is sealed with a key only this cache folder holds: it reads as empty."""
    import marshal
    import zlib

    from kbtool.store import cache

    first, _, _ = _read(tree)
    assert first.path is not None
    body = first.path.read_bytes()[len(b"KB-DOCS\n") + cache.SEAL:]
    salt, entries = marshal.loads(body)
    forged = {k: ({**v[0], "kind": "no-such-kind"}, v[1], v[2]) for k, v in entries.items()}
    body = marshal.dumps((salt, forged))
    first.path.write_bytes(b"KB-DOCS\n" + zlib.crc32(body).to_bytes(4, "little") + body)
    docs, doc, _ = _read(tree)
    assert docs.misses == 1 and doc.data["kind"] == "architecture"  # type: ignore[union-attr]
    first.path.write_bytes(b"KB-DOCS\n" + cache._digest(b"KB-DOCS\n", body, bytes(32)) + body)  # another key
    docs, doc, _ = _read(tree)
    assert docs.misses == 1 and doc.data["kind"] == "architecture"  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse"])
def test_a_cache_file_that_is_not_a_small_regular_file_reads_as_empty(tree: Path, kind: str) -> None:
    import os

    first, _, _ = _read(tree)
    assert first.path is not None
    first.path.unlink()
    if kind == "fifo":
        os.mkfifo(first.path)
    elif kind == "dev-zero":
        first.path.symlink_to("/dev/zero")
    else:
        with first.path.open("wb") as f:
            f.truncate(8 << 30)
    docs, doc, _ = _read(tree)
    assert docs.misses == 1 and doc.data["id"] == "a"  # type: ignore[union-attr]
    assert first.path.is_file() and not first.path.is_symlink() and first.path.stat().st_size < 1 << 20  # rebuilt
