"""kb's own re-implementation of how ruamel.yaml's Emitter (0.19) lays out the parts of YAML that kb's canonical
form uses: same output, written differently (token scans instead of ruamel's character loop).

`emit(root)` writes a document the way ruamel's emitter writes the events of the same tree, with kb's layout
(width 120, mapping and sequence indent 2, dash offset 0, unicode allowed, no comments, anchors or tags). It
exists for speed: ruamel's emitter spends most of its time re-analysing every scalar character by character.
Method names follow ruamel's so the two can be read side by side; tests compare the two on random trees.

A tree node is ("map", flow, [(key, node), ...]), ("seq", flow, [node, ...]) or
("scalar", False, (value, requested_style, implicit)) with `implicit` as ruamel's ScalarEvent has it.
"""

from __future__ import annotations

import contextlib
import re
from functools import lru_cache
from typing import Any, NamedTuple

WIDTH = 120
INDENT = 2
_BREAKS = "\n\x85\u2028\u2029"
_WS = "\0 \t\r" + _BREAKS
_SPECIAL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufeff\ufffe\uffff]")
_FLOW_INNER = re.compile(r"[,\[\]{}]")
_COLON_WS = re.compile(":(?:[\0 \t\r\n\x85\u2028\u2029]|\\Z)")
_HASH_AFTER_WS = re.compile("[\0 \t\r\n\x85\u2028\u2029]#")
_LINE_BREAK = re.compile("[\n\x85\u2028\u2029]")
_SPACE_BREAK = re.compile(" [\n\x85\u2028\u2029]")
_BREAK_SPACE = re.compile("[\n\x85\u2028\u2029] ")
_PLAIN_TOKENS = re.compile(r" +|[^ ]+")
_SQ_TOKENS = re.compile("( +)|([\n\x85\u2028\u2029]+)|(')|([^ \n\x85\u2028\u2029']+)")


class Decline(Exception):
    """The tree holds something this port does not write (ruamel would add a tag or an explicit key)."""


class Analysis(NamedTuple):
    empty: bool
    multiline: bool
    allow_flow_plain: bool
    allow_block_plain: bool
    allow_single_quoted: bool
    allow_double_quoted: bool
    allow_block: bool


@lru_cache(maxsize=8192)
def analyze_scalar(s: str) -> Analysis:
    """ruamel's Emitter.analyze_scalar (YAML 1.2, unicode allowed), by regular expressions."""
    if not s:
        return Analysis(True, False, False, True, True, True, False)
    block = flow = s.startswith(("---", "..."))
    first = s[0]
    followed = len(s) == 1 or s[1] in _WS
    if first in "#,[]{}&*!|>'\"%@`":
        block = flow = True
    if first in "?:":
        if len(s) == 1:
            flow = True
        if followed:
            block = True
    if first == "-" and followed:
        block = flow = True
    if _FLOW_INNER.search(s, 1):
        flow = True
    if _COLON_WS.search(s, 1) or _HASH_AFTER_WS.search(s):
        block = flow = True
    line_breaks = _LINE_BREAK.search(s) is not None
    special = _SPECIAL.search(s) is not None
    trailing_space = s[-1] == " "
    edge = s[0] == " " or trailing_space or s[0] in _BREAKS or s[-1] in _BREAKS
    fp = bp = not edge
    sq = dq = blk = True
    if trailing_space:
        blk = False
    if _BREAK_SPACE.search(s):
        fp = bp = sq = False
    if special or _SPACE_BREAK.search(s):  # (ruamel: `allow_space_break` is off)
        fp = bp = sq = blk = False
    if line_breaks:
        fp = bp = False
    if flow:
        fp = False
    if block:
        bp = False
    return Analysis(False, line_breaks, fp, bp, sq, dq, blk)


_ESCAPES = {"\0": "0", "\x07": "a", "\x08": "b", "\x09": "t", "\x0a": "n", "\x0b": "v", "\x0c": "f",
            "\x0d": "r", "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L",
            "\u2029": "P"}


def emit(root: tuple[str, Any, Any]) -> str:
    w = _Writer()
    w.node(root, root=True)
    w.write_indent()  # expect_document_end
    return "".join(w.parts)


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.column = 0
        self.whitespace = True
        self.indention = True
        self.no_newline: bool | None = None
        self.indent: int | None = None
        self.indents: list[tuple[int | None, bool | None]] = []
        self.flow: list[str] = []
        self.root = self.seq_ctx = self.map_ctx = self.simple = False

    # ---- nodes (expect_node and the collection handlers) ----

    def node(self, n: tuple[str, Any, Any], root: bool = False, sequence: bool = False, mapping: bool = False,
             simple_key: bool = False) -> None:
        self.root, self.seq_ctx, self.map_ctx, self.simple = root, sequence, mapping, simple_key
        shape, flow, body = n
        if shape == "scalar":
            self.increase_indent(flow=True)
            self.process_scalar(*body)
            self.indent = self.indents.pop()[0]
        elif shape == "seq":
            if self.flow or flow or not body:
                self.flow_sequence(body)
            else:
                self.block_sequence(body)
        elif self.flow or flow or not body:
            self.flow_mapping(body)
        else:
            self.block_mapping(body)

    def seq_seq(self) -> None:
        if len(self.indents) >= 2 and self.indents[-2][1] and self.indents[-1][1]:
            self.indention = True
            self.no_newline = False

    def increase_indent(self, flow: bool = False, sequence: bool | None = None, indentless: bool = False) -> None:
        self.indents.append((self.indent, sequence))
        if self.indent is None:
            if not flow:
                self.indent = 0
        elif not indentless:
            self.indent += INDENT

    def seq_flow_align(self) -> int:
        if len(self.indents) < 2 or not self.indents[-1][1]:
            return 0
        base = self.indents[-1][0] or 0
        return base + INDENT - self.column - 1

    def flow_sequence(self, items: list[Any]) -> None:
        ind = self.seq_flow_align()
        self.write_indicator(" " * ind + "[", True, whitespace=True)
        self.increase_indent(flow=True, sequence=True)
        self.flow.append("[")
        self.seq_seq()
        if not items:
            self.indent = self.indents.pop()[0]
            self.flow.pop()
            self.write_indicator("]", False)
            if not self.flow:
                self.write_line_break()
            return
        for i, item in enumerate(items):
            if i:
                self.write_indicator(",", False)
            if self.column > WIDTH:
                self.write_indent()
            self.node(item, sequence=True)
        self.indent = self.indents.pop()[0]
        self.flow.pop()
        self.write_indicator("]", False)
        self.no_newline = False

    def flow_mapping(self, pairs: list[Any]) -> None:
        ind = self.seq_flow_align()
        start = "" if len(pairs) == 1 and self.flow and self.flow[-1] == "[" else "{"
        self.write_indicator(" " * ind + start, True, whitespace=True)
        self.flow.append(start)
        self.increase_indent(flow=True, sequence=False)
        if not pairs:
            self.indent = self.indents.pop()[0]
            self.flow.pop()
            self.write_indicator("}", False)
            if not self.flow:
                self.write_line_break()
            return
        for i, (key, value) in enumerate(pairs):
            if i:
                self.write_indicator(",", False)
            if self.column > WIDTH:
                self.write_indent()
            self.simple_key(key)
            self.write_indicator(":", False)
            self.node(value, mapping=True)
        self.indent = self.indents.pop()[0]
        if self.flow.pop() != "":
            self.write_indicator("}", False)
        self.no_newline = False

    def block_sequence(self, items: list[Any]) -> None:
        indentless = not self.indention if self.map_ctx else False
        self.increase_indent(flow=False, sequence=True, indentless=indentless)
        self.seq_seq()
        for item in items:
            nonl = self.no_newline if self.column == 0 else False
            self.write_indent()
            self.write_indicator("-", True, indention=True)
            if nonl:
                self.no_newline = True
            self.node(item, sequence=True)
        self.indent = self.indents.pop()[0]
        self.no_newline = False

    def block_mapping(self, pairs: list[Any]) -> None:
        self.increase_indent(flow=False, sequence=False)
        for key, value in pairs:
            self.write_indent()
            self.simple_key(key)
            self.write_indicator(":", False)
            self.node(value, mapping=True)
        self.indent = self.indents.pop()[0]

    def simple_key(self, key: str) -> None:
        a = analyze_scalar(key)
        if len(key) >= 128 or a.multiline:
            raise Decline  # ruamel writes an explicit `? ` key
        self.node(("scalar", False, (key, None, (True, True, True))), mapping=True, simple_key=True)

    # ---- scalars ----

    def choose_scalar_style(self, value: str, style: str | None, implicit: tuple[bool, bool, bool],
                            a: Analysis) -> str:
        if style == '"':
            return '"'
        if (not style and (implicit[0] or not implicit[2]) and not (self.simple and (a.empty or a.multiline))
                and (a.allow_flow_plain if self.flow else a.allow_block_plain)):
            return ""
        if style and style in "|>" and not self.flow and not self.simple:
            return style
        if not style and a.allow_double_quoted and ("'" in value or "\n" in value):
            return '"'
        if (not style or style == "'") and a.allow_single_quoted and not (self.simple and a.multiline):
            return "'"
        return '"'

    def process_scalar(self, value: str, style: str | None, implicit: tuple[bool, bool, bool]) -> None:
        a = analyze_scalar(value)
        chosen = self.choose_scalar_style(value, style, implicit, a)
        if not ((chosen == "" and implicit[0]) or (chosen != "" and implicit[1])):
            raise Decline  # ruamel would write a tag
        split = not self.simple
        if self.seq_ctx and not self.flow:
            self.write_indent()
        if chosen == '"':
            self.write_double_quoted(value, split)
        elif chosen == "'":
            self.write_single_quoted(value, split)
        elif chosen == "|":
            self.write_literal(value)
        elif chosen == "":
            self.write_plain(value, split)
        else:
            raise Decline

    # ---- writers ----

    def write(self, data: str) -> None:
        self.parts.append(data)

    def write_indicator(self, indicator: str, need_whitespace: bool, whitespace: bool = False,
                        indention: bool = False) -> None:
        data = indicator if self.whitespace or not need_whitespace else " " + indicator
        self.whitespace = whitespace
        self.indention = self.indention and indention
        self.column += len(data)
        self.write(data)

    def write_indent(self) -> None:
        indent = self.indent or 0
        if not self.indention or self.column > indent or (self.column == indent and not self.whitespace):
            if self.no_newline:
                self.no_newline = False
            else:
                self.write_line_break()
        if self.column < indent:
            self.whitespace = True
            self.write(" " * (indent - self.column))
            self.column = indent

    def write_line_break(self, data: str = "\n") -> None:
        self.whitespace = True
        self.indention = True
        self.column = 0
        self.write(data)

    def write_plain(self, text: str, split: bool) -> None:
        if not text:
            return
        if not self.whitespace:
            self.column += 1
            self.write(" ")
        self.whitespace = False
        self.indention = False
        if self.column + len(text) <= WIDTH:  # fits: no word crosses the width, no space sits past it
            self.column += len(text)
            self.write(text)
            return
        for tok in _PLAIN_TOKENS.findall(text):
            if tok[0] == " ":
                if len(tok) == 1 and self.column >= WIDTH and split:
                    self.write_indent()
                    self.whitespace = False
                    self.indention = False
                else:
                    self.column += len(tok)
                    self.write(tok)
            else:
                if len(tok) + self.column > WIDTH and self.indent is not None and self.column > self.indent:
                    self.write_indent()
                self.column += len(tok)
                self.write(tok)

    def write_single_quoted(self, text: str, split: bool) -> None:
        self.write_indicator("'", True)
        for m in _SQ_TOKENS.finditer(text):
            spaces, breaks, quote, other = m.groups()
            if spaces is not None:
                if len(spaces) == 1 and self.column > WIDTH and split and m.start() != 0 and m.end() != len(text):
                    self.write_indent()
                else:
                    self.column += len(spaces)
                    self.write(spaces)
            elif breaks is not None:
                if breaks[0] == "\n":
                    self.write_line_break()
                for br in breaks:
                    self.write_line_break(br)
                self.write_indent()
            elif quote is not None:
                self.column += 2
                self.write("''")
            else:
                self.column += len(other)
                self.write(other)
        self.write_indicator("'", False)

    def write_double_quoted(self, text: str, split: bool) -> None:
        self.write_indicator('"', True)
        start = end = 0
        while end <= len(text):
            ch = text[end] if end < len(text) else None
            if ch is None or ch in '"\\\x85\u2028\u2029\ufeff' or not (
                    "\x20" <= ch <= "\x7e" or "\xa0" <= ch <= "\ud7ff" or "\ue000" <= ch <= "\ufffd"
                    or "\U00010000" <= ch <= "\U0010ffff"):
                if start < end:
                    self.column += end - start
                    self.write(text[start:end])
                    start = end
                if ch is not None:
                    if ch in _ESCAPES:
                        data = "\\" + _ESCAPES[ch]
                    elif ch <= "\xff":
                        data = f"\\x{ord(ch):02X}"
                    elif ch <= "\uffff":
                        data = f"\\u{ord(ch):04X}"
                    else:
                        data = f"\\U{ord(ch):08X}"
                    self.column += len(data)
                    self.write(data)
                    start = end + 1
            if (0 < end < len(text) - 1 and (ch == " " or start >= end)
                    and self.column + (end - start) > WIDTH and split):
                need_backslash = True
                if len(text) > end:
                    try:
                        space_pos = text.index(" ", end)
                        with contextlib.suppress(ValueError, IndexError):
                            space_pos = text.index("\n", end, space_pos)
                        if text[space_pos] == "\n" and text[space_pos + 1] != " ":
                            pass
                        elif ('"' not in text[end:space_pos] and "'" not in text[end:space_pos]
                              and text[space_pos + 1] not in " \n" and text[end - 1:end + 1] != "  "
                              and start != end):
                            need_backslash = False
                    except (ValueError, IndexError):
                        pass
                data = text[start:end] + ("\\" if need_backslash else "")
                if start < end:
                    start = end
                self.column += len(data)
                self.write(data)
                self.write_indent()
                self.whitespace = False
                self.indention = False
                if text[start] == " ":
                    if not need_backslash:
                        start += 1
                    data = "\\" if need_backslash else ""
                    self.column += len(data)
                    self.write(data)
            end += 1
        self.write_indicator('"', False)

    def write_literal(self, text: str) -> None:
        hints = ""
        if text:
            if text[0] in " " + _BREAKS:
                hints = "2"
            if text[-1] not in _BREAKS:
                hints += "-"
            elif len(text) == 1 or text[-2] in _BREAKS:
                raise Decline  # `|+`: ruamel may end the stream with `...`
        self.write_indicator("|" + hints, True)
        self.write_line_break()
        breaks = True
        start = end = 0
        while end <= len(text):
            ch = text[end] if end < len(text) else None
            if breaks:
                if ch is None or ch not in _BREAKS:
                    for br in text[start:end]:
                        self.write_line_break(br)
                    if ch is not None:
                        self.write_indent()
                    start = end
            elif ch is None or ch in _BREAKS:
                self.write(text[start:end])  # ruamel does not advance the column here
                if ch is None:
                    self.write_line_break()
                start = end
            if ch is not None:
                breaks = ch in _BREAKS
            end += 1
