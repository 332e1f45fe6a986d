"""kbtool.store.jsoncache: a shipped JSON data file is parsed once and then read marshalled from the cache folder,
only while the file is unchanged; a stale, corrupted or foreign cache file is never believed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kbtool.store import jsoncache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("KB_CACHE_DIR", str(folder))
    monkeypatch.delenv("KB_NO_CACHE", raising=False)
    return folder


def _cached(folder: Path) -> list[Path]:
    return sorted(folder.glob("json-*.marshal"))


def test_parsed_once_then_read_from_the_cache(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = {"engine": "vllm", "flags": {"--block-size": {"type": "int", "choices": [8, 16, 32]}}, "x": None}
    f = tmp_path / "flags.json"
    f.write_text(json.dumps(data), encoding="utf-8")
    assert jsoncache.load(str(f)) == data
    assert len(_cached(cache)) == 1

    def no_json(*a: object, **k: object) -> None:
        raise AssertionError("parsed again although the file did not change")

    monkeypatch.setattr(json, "load", no_json)
    assert jsoncache.load(str(f)) == data


def test_an_edited_file_is_read_again(tmp_path: Path, cache: Path) -> None:
    f = tmp_path / "flags.json"
    f.write_text('{"a": 1}', encoding="utf-8")
    assert jsoncache.load(str(f)) == {"a": 1}
    st = f.stat()
    f.write_text('{"a": 2}', encoding="utf-8")  # same size: the mtime tells
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert jsoncache.load(str(f)) == {"a": 2}


def test_a_tampered_cache_file_is_not_believed(tmp_path: Path, cache: Path) -> None:
    f = tmp_path / "flags.json"
    f.write_text('{"choices": [1, 2]}', encoding="utf-8")
    jsoncache.load(str(f))
    (c,) = _cached(cache)
    raw = bytearray(c.read_bytes())
    raw[-3] ^= 0xFF  # the marshalled value changes, its seal does not
    c.write_bytes(bytes(raw))
    assert jsoncache.load(str(f)) == {"choices": [1, 2]}


def test_cache_off_still_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_NO_CACHE", "1")
    f = tmp_path / "flags.json"
    f.write_text("[1, 2.5, true]", encoding="utf-8")
    assert jsoncache.load(str(f)) == [1, 2.5, True]
    with pytest.raises(ValueError):
        (tmp_path / "bad.json").write_text("{", encoding="utf-8")
        jsoncache.load(str(tmp_path / "bad.json"))
