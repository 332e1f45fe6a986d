"""The plain sink writes what rich writes without styles; pick_sink chooses it exactly when rich would not style.

Each check compares against rich itself (15.x), so a rich upgrade that changes its behaviour fails here.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text

from kbtool.render.choose import pick_sink
from kbtool.render.query import render_answer, render_multi
from kbtool.render.richsink import RichSink
from kbtool.render.sink import PlainSink, plain_rule, plain_text, wants_rich
from tests.util import DATA

FIX = str(DATA / "kb_fixture")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
YES = {"gpu": "hop", "head_dim": 128, "lib": ["cuda=12.8"], "batch": 4, "kv": "bf16", "kernel": ["k-gqa"]}
RICH_ONLY = {"ctx": "128k", "kv": "fp8"}


def _solve(**q: Any) -> Any:
    from kbtool.solve.load import load_kb
    from kbtool.solve.query import build_query
    from kbtool.solve.solver import solve

    return solve(load_kb(Path(FIX)), build_query(**q))


def _console(buf: io.StringIO, *, terminal: bool, width: int = 80) -> Console:
    return Console(file=buf, force_terminal=terminal, color_system="standard" if terminal else None, width=width,
                   highlight=False, soft_wrap=True, legacy_windows=False)


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


ENVS = [{}, {"FORCE_COLOR": "1"}, {"FORCE_COLOR": ""}, {"FORCE_COLOR": "0"}, {"TTY_COMPATIBLE": "0"},
        {"TTY_COMPATIBLE": "1"}, {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "2"},
        {"NO_COLOR": "1"}, {"TTY_INTERACTIVE": "1"}, {"TTY_INTERACTIVE": "0"}, {"TERM": "dumb"}]


@pytest.mark.parametrize("tty", [False, True])
@pytest.mark.parametrize("env", ENVS, ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()) or "none")
def test_wants_rich_is_richs_is_terminal(tty: bool, env: dict[str, str]) -> None:
    stream = _Stream(tty)
    assert wants_rich(stream, env) == Console(file=stream, _environ=env).is_terminal


def test_pick_sink_plain_for_a_pipe_rich_for_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(var, raising=False)
    assert isinstance(pick_sink(_Stream(False)), PlainSink)
    assert isinstance(pick_sink(_Stream(True)), RichSink)
    monkeypatch.setenv("NO_COLOR", "1")
    assert isinstance(pick_sink(_Stream(True)), RichSink)  # rich drops the colour itself
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert isinstance(pick_sink(_Stream(False)), RichSink)


TEXTS = ["plain", "a\tb", "\tx", "abcdefg\th", "abcdefgh\ti\tj", "x\r\ny\x07z\x0b\x0c\x08!", "é\tb", "漢字\tx",
         "a\nb\tc", "\x1b[31mred", "tail\t", "— dash…\t."]


@pytest.mark.parametrize("text", TEXTS)
def test_plain_text_is_what_rich_prints(text: str) -> None:
    buf = io.StringIO()
    _console(buf, terminal=False).print(Text(text))
    assert plain_text(text) + "\n" == buf.getvalue()


def test_segments_join_before_tabs_expand() -> None:
    segs = [("ab", ""), ("c\td", "dim"), ("\te\r", "bold green")]
    plain, rich = io.StringIO(), io.StringIO()
    PlainSink(plain).line(segs)
    RichSink(_console(rich, terminal=False)).line(segs)
    assert plain.getvalue() == rich.getvalue() == "abc     d       e\n"


TITLES = ["", "a", "ab", "gpu-hopper", "gpu-blackwell", "nvidia-a100-40gb-sxm", "x" * 90, "é-title", "tab\there"]


@pytest.mark.parametrize("ascii_only", [False, True])
@pytest.mark.parametrize("title", TITLES)
def test_plain_rule_is_richs_rule(title: str, ascii_only: bool) -> None:
    enc = "latin-1" if ascii_only else "utf-8"
    for width in [*range(0, 30), 59, 60, 61, 80, 100, 101]:
        raw = io.BytesIO()
        stream = io.TextIOWrapper(raw, encoding=enc, errors="replace")
        console = Console(file=stream, width=width, color_system=None, highlight=False, soft_wrap=True,
                          legacy_windows=False)
        console.rule(Text(title))
        stream.flush()
        want = raw.getvalue().decode(enc)
        assert plain_rule(title, width, ascii_only).encode(enc, errors="replace").decode(enc) == want, (title, width)


def test_plain_sink_rule_width_from_columns() -> None:
    buf = io.StringIO()
    PlainSink(buf, {"COLUMNS": "20"}).rule("gpu")
    assert buf.getvalue() == "─────── gpu ────────\n"


@pytest.mark.parametrize("query", [YES, RICH_ONLY], ids=["one-answer", "rows"])
def test_rich_sink_is_plain_sink_plus_styles(query: dict[str, Any]) -> None:
    answer = _solve(**query)
    render = render_multi if hasattr(answer, "rows") else render_answer
    plain, styled = io.StringIO(), io.StringIO()
    render(PlainSink(plain, {"COLUMNS": "80"}), answer, explain=True)
    render(_console(styled, terminal=True), answer, explain=True)
    assert ANSI.search(styled.getvalue())
    # rich draws the rule in its own colour; the text between the codes is the plain text
    assert ANSI.sub("", styled.getvalue()) == plain.getvalue()


def test_rich_sink_styles_the_verdict() -> None:
    buf = io.StringIO()
    render_answer(RichSink(_console(buf, terminal=True)), _solve(**YES))
    first = buf.getvalue().splitlines()[0]
    assert first.startswith("\x1b[1mverdict:\x1b[0m \x1b[1;32myes\x1b[0m — "), first
    assert "\x1b[32mk-gqa\x1b[0m" in buf.getvalue()  # the kernel to use, in its status colour
    assert "\x1b[2m" in buf.getvalue()  # dim query line


def test_plain_render_does_not_import_rich() -> None:
    code = (
        "import io, sys\nfrom pathlib import Path\n"
        "from kbtool.render.query import PlainSink, render_answer, render_multi\n"
        "from kbtool.solve.load import load_kb\nfrom kbtool.solve.query import build_query\n"
        "from kbtool.solve.solver import solve\n"
        f"kb = load_kb(Path({FIX!r}))\nbuf = io.StringIO()\n"
        "render_answer(PlainSink(buf), solve(kb, build_query(gpu='hop', head_dim=128, kv='fp8', ctx='128k')),"
        " explain=True)\n"
        "render_multi(PlainSink(buf), solve(kb, build_query(ctx='128k', kv='fp8')), explain=True)\n"
        "assert 'verdict:' in buf.getvalue() and '─' in buf.getvalue(), buf.getvalue()\n"
        "bad = sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
