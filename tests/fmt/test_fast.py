"""The fast canonical emitter (kbtool/fmt/fast.py) never disagrees with `canonical`: it returns the same text or
None. Checked on every shipped record, every test-data file, mutated records and random trees."""

from __future__ import annotations

import io
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml.emitter import Emitter
from ruamel.yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from ruamel.yaml.tag import Tag

from kbtool.checks import style
from kbtool.errors import KbError
from kbtool.fmt import fast, fastemit
from kbtool.fmt.core import canonical
from kbtool.fmt.fast import fast_canonical
from kbtool.kb import KB
from kbtool.store.reader import parse_bytes
from kbtool.store.records import load_tree
from tests.util import DATA, RECORDS


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.yaml") if "evidence" not in p.parts)


def _verdict(text: str, path: Path) -> tuple[str | None, str | None]:
    """(canonical text or None where canonical refuses, fast text or None where it declines)."""
    try:
        want: str | None = canonical(text, path)
    except KbError:
        want = None
    return want, fast_canonical(text, path)


def _agrees(text: str, path: Path) -> bool:
    """fast_canonical(text) is None or canonical(text); the same for the canonical text. True when decided."""
    want, got = _verdict(text, path)
    assert got is None or got == want, f"{path}: the fast path disagrees with canonical()"
    if want is not None:
        again = fast_canonical(want, path)
        assert again is None or again == want, f"{path}: the fast path disagrees on the canonical text"
    return got is not None


def test_shipped_records_are_decided_and_agree() -> None:
    files = _files(RECORDS)
    assert len(files) > 100
    decided = sum(_agrees(p.read_text("utf-8"), p) for p in files)
    print(f"fast path on shipped records: {decided} decided, {len(files) - decided} declined of {len(files)}")
    assert decided >= 0.9 * len(files)


def test_test_data_agrees() -> None:
    files = sorted(DATA.rglob("*.yaml"))
    assert len(files) > 50
    decided = 0
    for p in files:
        try:
            text = p.read_text("utf-8")
        except UnicodeDecodeError:
            continue
        decided += _agrees(text, p)
    print(f"fast path on test data: {decided} decided of {len(files)}")
    assert decided > 0


def test_declines_what_the_round_trip_keeps() -> None:
    path = RECORDS / "claims" / "x.yaml"
    base = "# yaml-language-server: $schema=../../schema/claim.schema.json\nid: x\nkind: claim\nname: n\n"
    assert fast_canonical(base, path) == base
    for extra in ("# a comment\n", "notes: a  # eol\n", "\nnotes: a\n", "notes: &a a\n", "notes: !!str a\n",
                  "? notes\n: a\n", "notes: 2024-01-01\n", "'notes': a\n", "notes: |+\n  a\n\n"):
        assert fast_canonical(base + extra, path) is None, extra
    for extra in ("notes: 'a #1'\n", "notes: |\n  a\n\n  # b\n", "notes: '2024-01-01'\n"):
        assert fast_canonical(base + extra, path) == canonical(base + extra, path), extra


# ---- mutated real records ----------------------------------------------------------------------------------

TRICKY = ["yes", "no", "on", "off", "null", "~", "true", "1.0", "1e3", "0x1F", "012", "1_000", ".inf", ": x",
          "#x", "a #b", "a: b", "a:b", "- x", "-x", "? x", "[x]", "{x}", "x, y", "*x", "&x", "!x", "%x", "@x",
          "`x", '"q"', "it's", "'q'", " lead", "trail ", "é€😀 ü", "2024-01-01", "2024-01-01 10:00:00", "",
          "a\nb", "a\n\nb\n", " a\nb", "a \nb", "a\nb\n", "x\x07y", "tab\there", "\u00a0nbsp", "a\u2028b",
          "---", "...", "x---", "a  b", "a   b c", "\\back", "-", ":", "?", "=", "<<", "a\\nb"]
WORDS = st.sampled_from(["attention", "kernel", "head_dim", "FA-2", "sm90", "(see", "PR", "#123", "it's", "a:",
                         "x", "'q'", "e.g.", "https://example.com/a#b", "é", "😀", "[1,", "2]", "-", ""])


@st.composite
def tricky_text(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.sampled_from(TRICKY))
    if kind in (1, 2):  # long, often folded: 90-200 characters of words
        n = draw(st.integers(90, 200))
        out = ""
        while len(out) < n:
            out += draw(WORDS) + draw(st.sampled_from([" ", " ", " ", "  ", "\n", ""]))
        return out[:n].strip(" ") if draw(st.booleans()) else out[:n]
    if kind == 3:
        return draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60))
    return "x" * draw(st.integers(100, 140)) + draw(st.sampled_from(["", " y", " " + "z" * 130]))


def _shuffle(data: Any, rnd: random.Random) -> Any:
    if isinstance(data, dict):
        keys = list(data)
        rnd.shuffle(keys)
        return {k: _shuffle(data[k], rnd) for k in keys}
    if isinstance(data, list):
        return [_shuffle(x, rnd) for x in data]
    return data


def _leaves(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in _leaves(v, (*path, k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in _leaves(v, (*path, i))]
    return [path] if path else []


def _put(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        data = data[p]
    data[path[-1]] = value


SAMPLE = _files(RECORDS)[::7]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SAMPLE), st.randoms(use_true_random=False), st.lists(tricky_text(), max_size=4),
       st.sampled_from([None, False, True]), st.sampled_from([None, "'", '"']), st.sampled_from([80, 120, 400]),
       st.booleans())
def test_mutated_records_agree(path: Path, rnd: random.Random, texts: list[str], flow: bool | None,
                               quote: str | None, width: int, reorder: bool) -> None:
    text = path.read_text("utf-8")
    doc, _ = parse_bytes(text.encode(), str(path))
    assert doc is not None
    data = _shuffle(doc.data, rnd) if reorder else doc.data
    leaves = _leaves(data)
    for t in texts:
        _put(data, rnd.choice(leaves), t)
    header = text.partition("\n")[0] + "\n"
    src = header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=width,
                                  default_flow_style=flow, default_style=quote)
    _agrees(src, path)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SAMPLE), st.randoms(use_true_random=False), st.lists(tricky_text(), min_size=1, max_size=3))
def test_edited_record_text_agrees(path: Path, rnd: random.Random, texts: list[str]) -> None:
    """Edits to the text itself, so flow and block styles, quoting and layout of the original survive."""
    lines = path.read_text("utf-8").splitlines(keepends=True)
    for t in texts:
        i = rnd.randrange(1, len(lines))
        key, sep, val = lines[i].partition(": ")
        if sep and val.strip() and val.lstrip()[0] not in "{[|>":
            dumped = yaml.safe_dump(t, allow_unicode=True, width=10**6, default_style=rnd.choice([None, "'", '"']))
            lines[i] = key + sep + dumped.removesuffix("\n...\n").rstrip("\n") + "\n"
        else:
            j = rnd.randrange(1, len(lines))
            lines[i], lines[j] = lines[j], lines[i]  # often breaks the YAML: then both must refuse
    _agrees("".join(lines), path)


# ---- the emitter port against ruamel's emitter, on random trees --------------------------------------------

_KEYS = st.sampled_from(["a", "id", "name", "x_y", "k-2", "long_key_name_" * 3])


def _scalar_node(draw: st.DrawFn) -> Any:
    value = draw(st.one_of(tricky_text(), st.sampled_from(["1", "true", "null", "1.5"])))
    sty = draw(st.sampled_from([None, "", "'", '"', "|"]))
    tag = "tag:yaml.org,2002:str"
    implicit = (draw(st.booleans()), True, True)
    return ("scalar", False, (value, sty, implicit)), tag


@st.composite
def trees(draw: st.DrawFn, depth: int = 0) -> Any:
    shape = draw(st.sampled_from(["scalar", "seq", "map"] if depth < 4 else ["scalar"]))
    if shape == "scalar" and depth:
        return _scalar_node(draw)[0]
    flow = draw(st.booleans()) and depth > 0
    if shape == "seq" and depth:
        return ("seq", flow, draw(st.lists(trees(depth + 1), max_size=4)))
    pairs = draw(st.lists(st.tuples(_KEYS, trees(depth + 1)), min_size=1 if not depth else 0, max_size=5,
                          unique_by=lambda p: p[0]))
    return ("map", flow, pairs)


def _events(node: Any, out: list[Any]) -> None:
    shape, flow, body = node
    if shape == "scalar":
        value, sty, implicit = body
        out.append(ScalarEvent(None, Tag(suffix="tag:yaml.org,2002:str"), implicit, value, style=sty))
    elif shape == "seq":
        out.append(SequenceStartEvent(None, Tag(suffix="tag:yaml.org,2002:seq"), True, flow_style=flow))
        for item in body:
            _events(item, out)
        out.append(SequenceEndEvent())
    else:
        out.append(MappingStartEvent(None, Tag(suffix="tag:yaml.org,2002:map"), True, flow_style=flow,
                                     nr_items=len(body)))
        for key, value in body:
            out.append(ScalarEvent(None, Tag(suffix="tag:yaml.org,2002:str"), (True, True, True), key))
            _events(value, out)
        out.append(MappingEndEvent())


def ruamel_emit(tree: Any) -> str:
    """The same tree through ruamel's own Emitter, set up as kbtool.store.roundtrip sets it up."""
    buf = io.StringIO()
    em: Any = Emitter(buf, width=120, allow_unicode=True, brace_single_entry_mapping_in_flow_sequence=False)
    em.best_map_indent = em.best_sequence_indent = 2
    em.sequence_dash_offset = 0
    em.use_version = None
    events: list[Any] = [StreamStartEvent(), DocumentStartEvent(explicit=None, version=None, tags=None)]
    _events(tree, events)
    events += [DocumentEndEvent(explicit=None), StreamEndEvent()]
    for ev in events:
        em.emit(ev)
    return buf.getvalue()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_emitter_port_matches_ruamel(tree: Any) -> None:
    try:
        mine: str | None = fastemit.emit(tree)
    except fastemit.Decline:
        mine = None
    if mine is not None:
        assert mine == ruamel_emit(tree)


@settings(max_examples=2000, deadline=None)
@given(st.one_of(tricky_text(), st.text(max_size=12)))
def test_scalar_analysis_matches_ruamel(s: str) -> None:
    em: Any = Emitter(io.StringIO(), allow_unicode=True)
    em.use_version = None
    a = em.analyze_scalar(s)
    assert fastemit.analyze_scalar(s) == (a.empty, a.multiline, a.allow_flow_plain, a.allow_block_plain,
                                          a.allow_single_quoted, a.allow_double_quoted, a.allow_block)


# ---- KB601 with and without the fast path ------------------------------------------------------------------


def test_kb601_same_with_and_without_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "records"
    shutil.copytree(RECORDS, root)
    rnd = random.Random(7)
    files = _files(root)
    for p in rnd.sample(files, 40):  # make some files non-canonical in different ways
        lines = p.read_text("utf-8").splitlines(keepends=True)
        how = rnd.randrange(4)
        if how == 0 and len(lines) > 3:
            lines[2], lines[3] = lines[3], lines[2]
        elif how == 1:
            lines[0] = "# yaml-language-server: $schema=../schema/wrong.json\n"
        elif how == 2:
            lines = [ln.replace(": ", ":  ", 1) for ln in lines]
        else:
            lines.append("zz_extra: 'yes'\n")
        p.write_text("".join(lines), "utf-8")
    kb = KB.from_load(load_tree(root))
    monkeypatch.setenv("KB_CACHE_DIR", "")
    monkeypatch.setattr(fast, "ENABLED", True)
    with_fast = style.find_non_canonical_files(kb)
    monkeypatch.setattr(fast, "ENABLED", False)
    without = style.find_non_canonical_files(kb)
    assert [(f.code, f.file, f.line) for f in with_fast] == [(f.code, f.file, f.line) for f in without]
    assert len(with_fast) >= 20
