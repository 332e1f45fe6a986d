"""kbtool.render.wrap gives the lines textwrap.wrap gives (break_long_words and break_on_hyphens off), so the
text answer wraps as it did while the query path no longer imports textwrap (and `re` with it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbtool.render.wrap import wrap

_PIECES = st.sampled_from(["a", "word", "kernel-id", "x" * 30, " ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c",
                           "\u00a0", "\u2014", "é", "—fa3", "-", "[k, verified]", "   "])
_TEXT = st.lists(_PIECES, max_size=40).map("".join)
_INDENT = st.sampled_from(["", "  ", "    ", " " * 11 + "- ", "\t"])


def _theirs(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest, break_long_words=False,
                         break_on_hyphens=False)


@settings(max_examples=600, deadline=None)
@given(text=_TEXT, width=st.integers(1, 60), first=_INDENT, rest=_INDENT)
def test_same_lines_as_textwrap(text: str, width: int, first: str, rest: str) -> None:
    assert wrap(text, width, first, rest) == _theirs(text, width, first, rest)


@pytest.mark.parametrize("text", ["", "   ", "verdict: yes — FlashAttention-3 serves 131072 tokens of fp8 KV on the "
                                  "H100 (sm90) with every gate passed", "a " * 80, "x" * 200 + " tail"])
@pytest.mark.parametrize("width", [1, 10, 40, 100, 120])
def test_answer_like_lines(text: str, width: int) -> None:
    assert wrap(text, width, "  ", "    ") == _theirs(text, width, "  ", "    ")


def test_width_must_be_positive() -> None:
    with pytest.raises(ValueError):
        wrap("a b", 0)


def test_query_path_does_not_import_textwrap_or_re() -> None:
    """A warm `kb query` answer in text: neither textwrap nor re is imported (each costs the query milliseconds)."""
    code = ("import sys\nfrom kbtool.render.query import render_answer\nfrom kbtool.render.wrap import wrap\n"
            "wrap('a b c', 3)\nprint(sorted(m for m in ('textwrap', 're') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
