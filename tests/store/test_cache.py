"""The compiled KB cache and the answer memo: fresh entries are used; stale, truncated or corrupted ones never."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kbtool.store import cache, cachefile
from tests.util import DATA, ROOT

FIX = DATA / "kb_fixture"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "records"
    shutil.copytree(FIX, root)
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KB_NO_CACHE", raising=False)
    return root


def _builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Count real loads (cache misses) by wrapping the uncached loader."""
    from kbtool.solve import load

    calls: list[Path] = []
    real = load.load_kb_report

    def spy(root: Path) -> load.LoadReport:
        calls.append(root)
        return real(root)

    monkeypatch.setattr(load, "load_kb_report", spy)
    return calls


def _ids(root: Path, use_cache: bool = True) -> list[str]:
    return sorted(cache.load_kb(root, use_cache).by_id)


def test_second_load_comes_from_the_cache(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _builds(monkeypatch)
    first = _ids(tree)
    assert len(calls) == 1
    target = cache.cache_file(tree)
    assert target is not None and target.is_file()
    assert _ids(tree) == first
    assert len(calls) == 1  # no rebuild


def test_cache_matches_an_uncached_load(tree: Path) -> None:
    cache.load_kb(tree)
    warm = cache.load_kb_report(tree)
    cold = cache.load_kb_report(tree, use_cache=False)
    assert sorted(warm.kb.by_id) == sorted(cold.kb.by_id)
    assert warm.skipped == cold.skipped
    for rid, rec in cold.kb.by_id.items():
        assert warm.kb.by_id[rid] == rec


def test_no_cache_bypasses(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _builds(monkeypatch)
    _ids(tree)
    _ids(tree, use_cache=False)
    monkeypatch.setenv("KB_NO_CACHE", "1")
    _ids(tree)
    assert len(calls) == 3


def test_content_change_invalidates(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _builds(monkeypatch)
    before = _ids(tree)
    victim = sorted(tree.rglob("*.yaml"))[0]
    text = victim.read_text()
    new = text.replace(f"id: {victim.stem}", f"id: {victim.stem}-renamed", 1)
    assert new != text
    victim.write_text(new)
    after = _ids(tree)
    assert len(calls) == 2
    assert f"{victim.stem}-renamed" in after and victim.stem not in after and victim.stem in before


def test_touch_keeps_the_cache(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A touch (new mtime, same bytes) reuses the cache after the content hash confirms it."""
    calls = _builds(monkeypatch)
    _ids(tree)
    victim = sorted(tree.rglob("*.yaml"))[0]
    st = victim.stat()
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    _ids(tree)
    assert len(calls) == 1  # content confirmed: no rebuild
    _ids(tree)
    assert len(calls) == 1


def test_new_and_removed_files_invalidate(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _builds(monkeypatch)
    _ids(tree)
    extra = tree / "notes.txt"
    extra.write_text("x")
    _ids(tree)
    extra.unlink()
    _ids(tree)
    assert len(calls) == 3


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty", "version", "stale"])
def test_damaged_cache_is_rebuilt(tree: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    want = _ids(tree)
    target = cache.cache_file(tree)
    assert target is not None
    raw = target.read_bytes()
    if damage == "truncate":
        target.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip":
        mid = len(raw) - 100
        target.write_bytes(raw[:mid] + bytes([raw[mid] ^ 0xFF]) + raw[mid + 1:])
    elif damage == "garbage":
        target.write_bytes(os.urandom(len(raw)))
    elif damage == "empty":
        target.write_bytes(b"")
    elif damage == "version":
        monkeypatch.setattr(cachefile, "FORMAT_VERSION", cachefile.FORMAT_VERSION + 1)
    elif damage == "stale":  # a valid file whose keys describe another tree: must not be served
        header, _ = cachefile.decode(raw) or ({}, b"")
        import pickle

        from kbtool.kb import KB
        from kbtool.solve.load import LoadReport

        fake = pickle.dumps(LoadReport(KB(), ["planted"]))
        target.write_bytes(cachefile.encode({**header, "stat": "0" * 64, "content": "0" * 64}, fake))
    calls = _builds(monkeypatch)
    report = cache.load_kb_report(tree)
    assert sorted(report.kb.by_id) == want
    assert "planted" not in report.skipped
    assert len(calls) == 1  # rebuilt
    assert cachefile.read(str(target)) is not None  # and rewritten whole
    calls.clear()
    cache.load_kb(tree)
    assert calls == []


def test_decode_rejects_every_truncation() -> None:
    raw = cachefile.encode({"k": "v"}, b"payload" * 10)
    assert cachefile.decode(raw) == ({"k": "v"}, b"payload" * 10)
    for n in range(len(raw)):
        assert cachefile.decode(raw[:n]) is None
    assert cachefile.decode(raw + b"x") is None


def test_write_is_atomic_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.cache"
    assert cachefile.write(str(target), b"one")
    assert cachefile.write(str(target), b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["f.cache"]
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cachefile.write(str(blocker / "x.cache"), b"z") is False  # never raises


# ---- the `kb` entry point and its fast query path (subprocesses: it is about whole-process behaviour) ----


def _kb(args: list[str], cache_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "KB_CACHE_DIR": str(cache_dir), **env}
    e.pop("KB_NO_CACHE", None)
    return subprocess.run([sys.executable, "-m", "kbtool", *args], capture_output=True, text=True, env=e,
                          cwd=ROOT, timeout=120)


QUERIES = [
    ["query", "--kb", str(FIX), "--gpu", "gpu-hopper", "--ctx", "128k", "--kv", "fp8"],
    ["query", "--kb", str(FIX), "--gpu", "gpu-hopper", "--json"],
    ["query", "--kb", str(FIX), "--ctx", "1m", "--fail-on-no"],
    ["query", "--kb", str(FIX), "--ctx=1m", "--explain", "--model", "fx-llama-70b"],
    ["query", "--kb", str(FIX), "--gpu", "hop", "--kernel", "k-gqa", "--kernel", "k-mla", "--lib", "cuda=12.8",
     "--head-dim", "128", "--batch", "4", "--util", ".8", "--phase", "decode", "--gpus", "2"],
    ["query", "--kb", str(FIX), "--gpu", "no-such-gpu"],
    ["query", "--kb", str(FIX), "--gpu", "gpu-hopper", "--ctx", "-5"],
    ["query", "--kb", str(FIX), "--gpu", "gpu-hopper", "--gpus", "+2"],
    ["query", "--kb", str(FIX), "--help"],
]


@pytest.mark.parametrize("args", QUERIES, ids=["text", "json", "multi", "explain", "many-options", "unknown-gpu",
                                                "bad-ctx", "odd-int", "help"])
def test_fast_path_says_what_the_full_cli_says(tmp_path: Path, args: list[str]) -> None:
    _kb(QUERIES[0], tmp_path / "c")  # writes the query image
    assert list((tmp_path / "c").glob("*.image"))
    full = _kb(args, tmp_path / "c", KB_DEBUG_NO_FAST="1")  # the full CLI
    for _ in range(2):
        fast = _kb(args, tmp_path / "c", KB_DEBUG="1")  # KB_DEBUG: a fast-path bug raises instead of falling back
        assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)


def test_fast_path_answers_without_the_full_cli(tmp_path: Path) -> None:
    """It is really taken: with the image fresh, a query runs without typer, pydantic, rich or yaml."""
    from tests.test_imports import imported

    args = ["query", "--kb", str(FIX), "--gpu", "gpu-blackwell", "--ctx", "128k", "--kv", "fp8"]
    _kb(args, tmp_path / "c")
    r, mods = imported(args, tmp_path / "c")
    assert r.returncode == 0 and r.stdout.startswith("verdict:")
    assert "kbtool.fastquery" in mods and "kbtool.solve.solver" in mods
    assert not {m.split(".")[0] for m in mods} & {"typer", "pydantic", "rich", "yaml"}


def test_fast_path_follows_the_records(tmp_path: Path) -> None:
    root = tmp_path / "records"
    shutil.copytree(FIX, root)
    args = ["query", "--kb", str(root), "--gpu", "gpu-hopper", "--json"]
    before = _kb(args, tmp_path / "c")
    assert before.returncode == 0 and _kb(args, tmp_path / "c").stdout == before.stdout
    claim = root / "claims" / "k-gqa-head-dim.yaml"
    claim.write_text(claim.read_text().replace("reject", "caveat", 1))  # edited in place: the answer changes
    edited = _kb(args, tmp_path / "c")
    assert edited.returncode == 0 and edited.stdout != before.stdout
    assert edited.stdout == _kb(["query", "--no-cache", *args[1:]], tmp_path / "c").stdout
    (root / "accelerators" / "gpu-hopper.yaml").unlink()  # the accelerator is gone: the answer must change
    after = _kb(args, tmp_path / "c")
    assert after.returncode == 2 and "unknown accelerator" in after.stderr


def test_where_is_the_same_after_a_cache_hit(tree: Path) -> None:
    import copy
    import pickle

    cold = cache.load_kb(tree, use_cache=False)
    cache.load_kb(tree)
    warm = cache.load_kb(tree)
    assert type(warm.where) is not dict  # served lazily from the cache
    assert len(warm.where) == len(cold.where) and sorted(warm.where) == sorted(cold.where)
    for rid, w in cold.where.items():
        got = warm.where[rid]
        assert (got.file, got.path, got.doc.data, got.doc.lines) == (w.file, w.path, w.doc.data, w.doc.lines)
        assert got.record is warm.by_id[rid]
        assert warm.location(rid, "id") == cold.location(rid, "id")
    assert sorted(pickle.loads(pickle.dumps(warm.where))) == sorted(cold.where)
    assert sorted(copy.copy(warm.where)) == sorted(dict(warm.where)) == sorted({**warm.where})


@pytest.mark.parametrize("parallel", [True, False], ids=["forked", "in-process"])
def test_stat_later_gives_the_stat_key(tmp_path: Path, parallel: bool) -> None:
    from kbtool.store import imagecache

    root = tmp_path / "records"
    shutil.copytree(FIX, root)
    want = cachefile.stat_key(str(root), imagecache.schema_folder())
    assert imagecache.stat_later(str(root), parallel=parallel)() == want
    later = imagecache.stat_later(str(root), parallel=parallel)  # started before the edit: may see either
    (root / "claims" / "k-gqa-head-dim.yaml").write_text("x: 1\n")
    assert later() is not None
    assert imagecache.stat_later(str(root), parallel=parallel)() != want


def test_header_length_and_files_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import marshal

    from kbtool.store import imagecache

    target = tmp_path / "x.cache"
    header = {"stat": b"s" * 1000, "code": b"c"}
    cachefile.write(str(target), cachefile.encode(header, b"payload"))
    assert cachefile.header_length(str(target)) == len(marshal.dumps(header))
    assert cachefile.header_length(str(tmp_path / "missing")) == 0
    root = tmp_path / "records"
    shutil.copytree(FIX, root)
    env_cache = tmp_path / "c"
    assert _kb(["query", "--kb", str(root), "--gpu", "gpu-hopper"], env_cache).returncode == 0
    monkeypatch.setenv("KB_CACHE_DIR", str(env_cache))
    n_files = sum(1 for _ in root.rglob("*") if _.is_file())
    hint = imagecache.files_hint(str(root))
    n_files += sum(1 for _ in (ROOT / "schema").rglob("*.json"))  # the stat key covers the schema folder
    assert n_files // 3 <= hint <= n_files * 3  # a rough count (the code key adds a few kB), from the header


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_a_damaged_query_image_is_never_used(tmp_path: Path, damage: str) -> None:
    args = ["query", "--kb", str(FIX), "--gpu", "gpu-hopper", "--ctx", "64k", "--json"]
    want = _kb(["query", "--no-cache", *args[1:]], tmp_path / "c")
    assert want.returncode == 0 and _kb(args, tmp_path / "c").stdout == want.stdout
    [image] = list((tmp_path / "c").glob("*.image"))
    raw = image.read_bytes()
    if damage == "truncate":
        image.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip":
        i = len(raw) - 100  # inside the payload: only the checksum can tell
        image.write_bytes(raw[:i] + bytes([raw[i] ^ 0x20]) + raw[i + 1:])
    else:
        image.write_bytes(b"KB-CACHE\n" + b"\0" * 64)
    got = _kb(args, tmp_path / "c", KB_DEBUG="1")
    assert (got.returncode, got.stdout, got.stderr) == (0, want.stdout, "")
    assert cachefile.read_view(str(image)) is not None  # rebuilt, whole again
    assert _kb(args, tmp_path / "c", KB_DEBUG="1").stdout == want.stdout
