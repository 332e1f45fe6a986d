"""Safe, located YAML reading: plain Python data plus the line of every node.

Reads never use a round-trip loader. Hostile input (python tags, alias bombs, deep nesting, huge or binary
files, bad encodings, tabs, duplicate keys) becomes findings, never exceptions.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from kbtool.escape import CONTROL
from kbtool.findings import Finding, PathPart, render_path
from kbtool.store.document import Document

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]
LOADER = _Loader  # libyaml's parser, the SafeLoader resolver and constructor either way (the writer reads with it)

MAX_BYTES = 1 << 20  # one record file; the largest real record is a few KB
MAX_NODES = 200_000  # counts nodes reached through aliases too: an alias bomb trips this
MAX_DEPTH = 64
CODE = "KB100"

_CORE = "tag:yaml.org,2002:"
_TAB_INDENT = re.compile(rb"^[ ]*\t", re.MULTILINE)


class _Bad(Exception):
    def __init__(self, message: str, line: int | None, path: tuple[PathPart, ...] = ()) -> None:
        super().__init__(message)
        self.line = line
        self.path = path


def read_document(path: Path | str, display: str | None = None,
                  root: Path | None = None) -> tuple[Document | None, list[Finding]]:
    """Read one YAML file through the untrusted-file reader (regular files only, size limit; with `root`,
    symlinks out of the tree refused). Returns (document, []) or (None, findings)."""
    from kbtool.store.untrusted import UntrustedInputError, read_bytes

    name = display or str(path)
    try:
        raw = read_bytes(path, given=name, root=root, limit=MAX_BYTES)
    except UntrustedInputError as e:
        return None, [_f(name, e.line, e.reason, e.fix)]
    return parse_bytes(raw, name)


def parse_bytes(raw: bytes, name: str, *, aliases: bool = True) -> tuple[Document | None, list[Finding]]:
    """`raw` as a Document, or None and the finding that says why. Without `aliases`, an alias (`*name`) is
    refused at its line: files where none belong (campaign plans) cannot expand one value into many."""
    if len(raw) > MAX_BYTES:
        return None, [_f(name, None, f"file is {len(raw):,} bytes; the limit is {MAX_BYTES:,}", None)]
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        return None, [_f(name, line, "binary file (NUL byte); a record must be UTF-8 YAML text", None)]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        return None, [_f(name, line, f"not UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start}",
                         "re-save the file as UTF-8")]
    m = _TAB_INDENT.search(raw)
    if m:
        line = raw[: m.start()].count(b"\n") + 1
        return None, [_f(name, line, "tab in indentation; YAML indents with spaces", "replace tabs with spaces")]
    if not text.strip():
        return None, [_f(name, 1, "empty file", "delete it, or run `kb new KIND ID` to scaffold a record")]
    try:
        node = yaml.compose(text, Loader=LOADER)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = mark.line + 1 if mark else None
        return None, [_f(name, at, f"malformed YAML: {e.problem or e.context}", None)]
    except yaml.YAMLError as e:
        return None, [_f(name, None, f"malformed YAML: {e}", None)]
    except RecursionError:
        return None, [_f(name, None, f"nesting deeper than {MAX_DEPTH} levels", None)]
    if node is None:
        return None, [_f(name, 1, "empty document", None)]
    doc = Document(name, None)
    builder = _Builder(doc.lines, aliases=aliases)
    try:
        doc.data = builder.build(node, (), 0)
    except _Bad as e:
        return None, [Finding(CODE, str(e), name, e.line, render_path(e.path), check="yaml")]
    doc.clean = builder.clean
    return doc, []


def _f(name: str, line: int | None, message: str, fix: str | None) -> Finding:
    return Finding(CODE, message, name, line, "$", fix=fix, check="yaml")


class _Builder:
    """Turns a composed node tree into plain data, counting nodes so aliases cannot explode."""

    def __init__(self, lines: dict[tuple[PathPart, ...], int], *, aliases: bool = True) -> None:
        self.lines = lines
        self.aliases = aliases
        self.built: set[int] = set()  # nodes built so far, when aliases are refused: a second visit is an alias
        self.nodes = 0
        self.clean = True  # no non-finite number, no control character seen so far

    def build(self, node: yaml.Node, path: tuple[PathPart, ...], depth: int) -> Any:
        self.nodes += 1
        line = node.start_mark.line + 1
        if self.nodes > MAX_NODES:
            raise _Bad(f"more than {MAX_NODES:,} nodes after alias expansion (alias bomb?)", line, path)
        if depth > MAX_DEPTH:
            raise _Bad(f"nesting deeper than {MAX_DEPTH} levels", line, path)
        if not self.aliases:
            if id(node) in self.built:
                raise _Bad("an alias (*name) where none belong", line, path)
            self.built.add(id(node))
        self.lines.setdefault(path, line)
        if isinstance(node, yaml.MappingNode):
            if node.tag != _CORE + "map":
                raise _Bad(f"unsupported tag {node.tag!r}; records use plain YAML", line, path)
            out: dict[str, Any] = {}
            for k, v in node.value:
                if k.tag == _CORE + "merge":
                    raise _Bad("merge keys (<<) are not supported in records", k.start_mark.line + 1, path)
                key = self._key(k, path)
                if key in out:
                    raise _Bad(f"duplicate key '{key}' (first at line {self.lines[(*path, key)]})",
                               k.start_mark.line + 1, (*path, key))
                self.lines[(*path, key)] = k.start_mark.line + 1
                out[key] = self.build(v, (*path, key), depth + 1)
            return out
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _CORE + "seq":
                raise _Bad(f"unsupported tag {node.tag!r}; records use plain YAML", line, path)
            return [self.build(v, (*path, i), depth + 1) for i, v in enumerate(node.value)]
        return self._seen(_scalar(node, line, path))

    def _key(self, k: yaml.Node, path: tuple[PathPart, ...]) -> str:
        if not isinstance(k, yaml.ScalarNode):
            raise _Bad("mapping keys must be plain scalars", k.start_mark.line + 1, path)
        return str(self._seen(_scalar(k, k.start_mark.line + 1, path)))

    def _seen(self, v: Any) -> Any:
        if (isinstance(v, str) and CONTROL.search(v)) or (isinstance(v, float) and not math.isfinite(v)):
            self.clean = False
        return v


_BOOL = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}


def _scalar(node: yaml.Node, line: int, path: tuple[PathPart, ...]) -> Any:
    tag, v = node.tag, node.value
    if tag == _CORE + "str" or tag == _CORE + "timestamp":  # dates stay strings
        return v
    if tag == _CORE + "null":
        return None
    if tag == _CORE + "bool":
        return _BOOL[v.lower()]
    if tag == _CORE + "int":
        s = v.replace("_", "")
        try:
            if s.lower().startswith(("0x", "-0x", "+0x")):
                return int(s, 16)
            if s.lower().startswith(("0o", "-0o", "+0o")):
                return int(s, 8)
            n = int(s)
        except ValueError:
            raise _Bad(f"cannot read integer {v!r}", line, path) from None
        if abs(n) > 2**63:
            raise _Bad(f"integer {v[:40]!r} is out of range", line, path)
        return n
    if tag == _CORE + "float":
        s = v.replace("_", "").lower()
        if s in (".nan", "nan"):
            return math.nan
        if s.lstrip("+-") in (".inf", "inf"):
            return -math.inf if s.startswith("-") else math.inf
        try:
            return float(s)
        except ValueError:
            raise _Bad(f"cannot read number {v!r}", line, path) from None
    raise _Bad(f"unsupported tag {tag!r}; records use plain YAML", line, path)


def load_yaml(path: Path | str, *, given: str | None = None, root: Path | None = None,
              limit: int | None = None, aliases: bool = True) -> Any:
    """A YAML file read through `read_bytes` and the record reader (its limits and located errors); without
    `aliases`, a file that uses one is refused."""
    from kbtool.store.untrusted import MAX_BYTES as UNTRUSTED_MAX
    from kbtool.store.untrusted import UntrustedInputError, check_tree, read_bytes

    name = given or str(path)
    raw = read_bytes(path, given=given, root=root, limit=UNTRUSTED_MAX if limit is None else limit)
    doc, problems = parse_bytes(raw, name, aliases=aliases)
    if doc is None:
        f = problems[0]
        raise UntrustedInputError(name, f"{f.path}: {f.message}", line=f.line, fix=f.fix or "check the file")
    check_tree(doc.data, name)
    return doc.data
