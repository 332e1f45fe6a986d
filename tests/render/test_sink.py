"""The sinks: plain text for pipes, ANSI styles for a terminal (NO_COLOR and TERM=dumb honoured), never rich."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kbtool.render.query import render_answer, render_multi
from kbtool.render.sink import AnsiSink, Sink, clean, for_stream, plain_rule
from tests.util import DATA, ROOT

FIX = str(DATA / "kb_fixture")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
YES = {"gpu": "hop", "head_dim": 128, "lib": ["cuda=12.8"], "batch": 4, "kv": "bf16", "kernel": ["k-gqa"]}
ROWS = {"ctx": "128k", "kv": "fp8"}


def _solve(**q: Any) -> Any:
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve
    from tests.util import load_kb

    return solve(load_kb(Path(FIX)), build_query(**q))


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


@pytest.mark.parametrize(("tty", "env", "kind", "colour"), [
    (False, {}, Sink, None),
    (True, {}, AnsiSink, True),
    (True, {"NO_COLOR": "1"}, AnsiSink, False),
    (True, {"TERM": "dumb"}, Sink, None),
    (False, {"FORCE_COLOR": "1"}, AnsiSink, True),
    (True, {"FORCE_COLOR": ""}, Sink, None),
])
def test_for_stream_picks_by_terminal_and_environment(tty: bool, env: dict[str, str], kind: type, colour: Any) -> None:
    sink = for_stream(_Stream(tty), env)
    assert type(sink) is kind
    if colour is not None:
        assert sink.colour is colour  # type: ignore[attr-defined]


def test_ansi_styles_and_no_color_keeps_bold() -> None:
    segs = [("verdict:", "bold"), (" ", ""), ("yes", "bold green")]
    buf = io.StringIO()
    AnsiSink(buf, {}).line(segs)
    assert buf.getvalue() == "\x1b[1mverdict:\x1b[0m \x1b[1;32myes\x1b[0m\n"
    buf = io.StringIO()
    AnsiSink(buf, {}, colour=False).line(segs)
    assert buf.getvalue() == "\x1b[1mverdict:\x1b[0m \x1b[1myes\x1b[0m\n"


@pytest.mark.parametrize(("text", "want"), [
    ("plain", "plain"), ("a\tb", "a       b"), ("\x1b[31mred", "\\x1b[31mred"),
    ("x\r\ny\x07z", "x\\x0d\ny\\x07z"), ("[/x] [bold]", "[/x] [bold]"), ("del\x7f", "del\\x7f"),
    ("c1\x9b2J\x9d0;t", "c1\\x9b2J\\x9d0;t"),
])
def test_clean_shows_control_characters_as_escapes(text: str, want: str) -> None:
    assert clean(text) == want


def test_rule_width_from_columns_and_ascii_streams() -> None:
    buf = io.StringIO()
    Sink(buf, {"COLUMNS": "20"}).rule("gpu")
    assert buf.getvalue() == "─────── gpu ────────\n"
    assert plain_rule("gpu", 11, ascii_only=True) == "--- gpu ---\n"
    assert plain_rule("", 5) == "─────\n" and plain_rule("x", 0) == ""


@pytest.mark.parametrize("query", [YES, ROWS], ids=["one-answer", "rows"])
def test_ansi_sink_is_plain_sink_plus_styles(query: dict[str, Any]) -> None:
    answer = _solve(**query)
    render = render_multi if hasattr(answer, "rows") else render_answer
    plain, styled = io.StringIO(), io.StringIO()
    render(Sink(plain, {"COLUMNS": "80"}), answer, explain=True)
    render(AnsiSink(styled, {"COLUMNS": "80"}), answer, explain=True)
    assert ANSI.search(styled.getvalue())
    assert ANSI.sub("", styled.getvalue()) == plain.getvalue()


def test_a_terminal_gets_ansi_from_the_lean_path(tmp_path: Path) -> None:
    """`kb query` in a pty: styled, the terminal's width, and neither rich nor typer imported."""
    import pty

    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path), "TERM": "xterm", "COLUMNS": "50"}
    env.pop("NO_COLOR", None)
    env.pop("FORCE_COLOR", None)
    args = [sys.executable, "-X", "importtime", "-m", "kbtool", "query", "--kb", FIX, "--ctx", "128k", "--explain"]
    out = io.BytesIO()
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdout is the pty; stderr (importtime) goes to a file
        err = os.open(tmp_path / "err", os.O_WRONLY | os.O_CREAT)
        os.dup2(err, 2)
        os.chdir(ROOT)
        os.execve(args[0], args, env)
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out.write(chunk)
    _, status = os.waitpid(pid, 0)
    text = out.getvalue().decode()
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "\x1b[1m" in text and "\x1b[32m" in text  # bold and colour
    assert "─" * 10 in text and all(len(ANSI.sub("", ln)) <= 50 for ln in text.splitlines() if "───" in ln)
    mods = {ln.rsplit("|", 1)[1].strip() for ln in (tmp_path / "err").read_text().splitlines()
            if ln.startswith("import time:")}
    assert not {m for m in mods if m.split(".")[0] in ("rich", "typer")}


def test_plain_render_does_not_import_rich() -> None:
    code = (
        "import io, sys\nfrom pathlib import Path\n"
        "from kbtool.render.query import PlainSink, render_answer, render_multi\n"
        "from kbtool.kb import load_kb\nfrom kbtool.solve.request import build_query\n"
        "from kbtool.solve.solver import solve\n"
        f"kb = load_kb(Path({FIX!r}))[0]\nbuf = io.StringIO()\n"
        "render_answer(PlainSink(buf), solve(kb, build_query(gpu='hop', head_dim=128, kv='fp8', ctx='128k')),"
        " explain=True)\n"
        "render_multi(PlainSink(buf), solve(kb, build_query(ctx='128k', kv='fp8')), explain=True)\n"
        "assert 'verdict:' in buf.getvalue() and '─' in buf.getvalue(), buf.getvalue()\n"
        "bad = sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
