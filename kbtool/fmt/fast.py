"""A fast path to the canonical text of a record file, without ruamel's round-trip loader.

`fast_canonical(text, path)` returns exactly what `kbtool.fmt.core.canonical(text, path)` returns, or None
when it cannot be sure (then callers fall back to `canonical`). It reads the file with kb's safe reader (the
data `canonical` formats) and with libyaml's event stream (flow or block style of every collection, anchors,
tags), orders keys and picks scalar styles as `normalize` does, and writes the result with kb's own emitter
(kbtool/fmt/fastemit.py), which lays text out as ruamel's does (line folding, quoting).

It declines whatever the round-trip loader would carry through and this path cannot see: comments (other
than the schema line), blank lines, anchors, tags, explicit keys, document markers and directives, dates,
keys that are not plain names, unusual line breaks.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from ruamel.yaml.nodes import ScalarNode as RScalarNode

from kbtool.fmt import fastemit
from kbtool.fmt.core import same, schema_line, strip_header
from kbtool.fmt.order import child_models, pick, sort_keys
from kbtool.fmt.scalars import _R11_RESOLVE, _R12_RESOLVE, style
from kbtool.model import MODELS
from kbtool.store import roundtrip
from kbtool.store.reader import MAX_BYTES, parse_bytes

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

ENABLED = os.environ.get("KB_FMT_FAST", "1") != "0"  # KB_FMT_FAST=0: always the ruamel round trip

_CORE = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_CORE + t for t in ("str", "int", "float", "bool", "null"))
_TIMESTAMP = _CORE + "timestamp"

# CR or a YAML 1.1-only line break, a tab, a document marker or directive, an explicit key (`? `): the
# round-trip loader reads these differently or keeps them; decline. (Anchors, aliases and tags show in
# libyaml's events.) A comment (`#` at a line start or after a blank) or a blank line is fine only inside a
# quoted or block scalar (where it is text); anywhere else the round trip keeps it.
_HARD = re.compile(r"[\r\t\x85\u2028\u2029\ufeff\x00]|^(?:---|\.\.\.|%)|(?:^|[ \[{,:-])\?(?=[ \n]|$)", re.MULTILINE)
_SOFT = re.compile(r"(?:^|[ \t])(#)|^[ \t]*\n", re.MULTILINE)
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,80}\Z")


class _Decline(Exception):
    """This file needs the round trip."""


Node = tuple[str, bool, Any]  # see kbtool/fmt/fastemit.py


def canonical_tree(body: str, data: dict[str, Any], model: type[BaseModel]) -> Node:
    """The tree `normalize` makes of the record `body` (header stripped) whose safe reading is `data`."""
    soft = [m.start(1) if m.group(1) else m.start() for m in _SOFT.finditer(body)]
    spans: list[tuple[int, int]] | None = [] if soft else None
    tree = _tree(body, spans)
    if soft:
        for at in soft:
            if not any(a < at < b for a, b in spans or ()):
                raise _Decline  # a comment or blank line outside any scalar
    return _normalize(tree, data, model, False, root=True)


def fast_canonical(text: str, path: Path, data: Any | None = None) -> str | None:
    """The text `canonical(text, path)` returns, or None when this path cannot be sure of it.

    `data`, when given, must be what kb's safe reader reads from `text` (saves a parse)."""
    if not ENABLED:
        return None
    body = strip_header(text)
    if len(body) > MAX_BYTES or not body.endswith("\n") or _HARD.search(body):
        return None
    if data is None:
        doc, _ = parse_bytes(body.encode("utf-8"), str(path))
        if doc is None:
            return None
        data = doc.data
    if not isinstance(data, dict):
        return None
    kind = data.get("kind")
    model = MODELS.get(kind) if isinstance(kind, str) else None
    if model is None or not isinstance(kind, str):
        return None
    try:
        dumped = fastemit.emit(canonical_tree(body, data, model))
    except (_Decline, fastemit.Decline, yaml.YAMLError, RecursionError, ValueError, TypeError, KeyError,
            IndexError):
        return None
    out = schema_line(path, kind) + "\n" + roundtrip._TRAILING.sub("", dumped)
    if out != text:  # canonical() reads its result back and refuses a change of meaning
        after, _ = parse_bytes(strip_header(out).encode("utf-8"), str(path))
        if after is None or not same(after.data, data):
            return None
    return out


# ---- the source's shape, from libyaml's events ----------------------------------------------------------
# ("map", flow, [(key, node), ...]), ("seq", flow, [node, ...]) or ("scalar", plain, None).


def _tree(body: str, spans: list[tuple[int, int]] | None) -> Node:
    """The source's shape; with `spans`, also collects where quoted and block scalars lie in `body`."""
    it = iter(yaml.parse(body, Loader=_Loader))
    if not isinstance(next(it), yaml.StreamStartEvent):
        raise _Decline
    start = next(it)
    if not isinstance(start, yaml.DocumentStartEvent) or start.explicit or start.version or start.tags:
        raise _Decline
    node = _node(next(it), it, body, spans)
    end = next(it)
    if not isinstance(end, yaml.DocumentEndEvent) or end.explicit:
        raise _Decline
    if not isinstance(next(it), yaml.StreamEndEvent):
        raise _Decline  # a second document
    return node


def _node(ev: Any, it: Any, body: str, spans: list[tuple[int, int]] | None) -> Node:
    if isinstance(ev, yaml.AliasEvent) or ev.anchor is not None or ev.tag is not None:
        raise _Decline
    if isinstance(ev, yaml.ScalarEvent):
        if spans is not None and ev.style:
            a, b = ev.start_mark.index, ev.end_mark.index  # type: ignore[union-attr]
            if ev.style in "|>":  # the span ends with its last text, not with blank lines after it
                b = a + len(body[a:b].rstrip())
            spans.append((a, b))
        return ("scalar", not ev.style, None)
    if isinstance(ev, yaml.SequenceStartEvent):
        items: list[Node] = []
        for sub in it:
            if isinstance(sub, yaml.SequenceEndEvent):
                return ("seq", bool(ev.flow_style), items)
            items.append(_node(sub, it, body, spans))
        raise _Decline
    if isinstance(ev, yaml.MappingStartEvent):
        pairs: list[tuple[str, Node]] = []
        for sub in it:
            if isinstance(sub, yaml.MappingEndEvent):
                return ("map", bool(ev.flow_style), pairs)
            if not (isinstance(sub, yaml.ScalarEvent) and sub.anchor is None and sub.tag is None
                    and not sub.style and _KEY.match(sub.value)):
                raise _Decline  # a key that is not a plain name
            _key(sub.value)
            pairs.append((sub.value, _node(next(it), it, body, spans)))
        raise _Decline
    raise _Decline


# ---- canonical order and styles (mirrors kbtool.fmt.core.normalize) --------------------------------------


def _normalize(node: Node, safe: Any, model: type[BaseModel] | None, flow: bool, root: bool = False) -> Node:
    shape, own_flow, body = node
    if shape == "map" and isinstance(safe, dict):
        keys = [k for k, _ in body]
        if list(safe) != keys:
            raise _Decline
        own_flow = own_flow and not root  # the record itself is always a block mapping
        inner = flow or own_flow
        vals = dict(body)
        if model is not None:
            keys = sort_keys(keys, model)
        pairs = []
        for key in keys:
            val = vals[key]
            cands = child_models(model, key) if model is not None else ()
            if val[0] == "seq":
                pairs.append((key, _seq(val, safe[key], cands, inner)))
            else:
                sub = pick(cands, [k for k, _ in val[2]]) if val[0] == "map" else None
                pairs.append((key, _normalize(val, safe[key], sub, inner)))
        return ("map", own_flow, pairs)
    if shape == "seq" and isinstance(safe, list):
        return _seq(node, safe, (), flow)
    if shape != "scalar" or isinstance(safe, dict | list):
        raise _Decline
    return ("scalar", False, _scalar(safe, flow, plain_source=own_flow))


def _seq(node: Node, safe: Any, cands: tuple[type[BaseModel], ...], flow: bool) -> Node:
    shape, own_flow, body = node
    if shape != "seq" or not isinstance(safe, list) or len(safe) != len(body):
        raise _Decline
    inner = flow or own_flow
    items = []
    for item, value in zip(body, safe, strict=True):
        sub = pick(cands, [k for k, _ in item[2]]) if item[0] == "map" else None
        items.append(_normalize(item, value, sub, inner))
    return ("seq", own_flow, items)


@lru_cache(maxsize=4096)
def _key(key: str) -> None:
    if _resolve11(key) != _STR or _resolve12(key) != _STR:
        raise _Decline  # read differently by YAML 1.1 and 1.2, or not as text


@lru_cache(maxsize=8192)
def _resolve11(value: str) -> str:
    return _R11_RESOLVE(yaml.ScalarNode, value, (True, False))


@lru_cache(maxsize=8192)
def _resolve12(value: str) -> str:
    return _R12_RESOLVE(RScalarNode, value, (True, False))


def _scalar(safe: Any, flow: bool, plain_source: bool) -> tuple[str, str | None, tuple[bool, bool, bool]]:
    """(value, style, implicit) of the scalar ruamel's representer makes of `safe` (see core._scalar)."""
    if isinstance(safe, bool):
        tag, value, sty = _BOOL, "true" if safe else "false", None
    elif isinstance(safe, int):
        tag, value, sty = _INT, str(safe), None
    elif isinstance(safe, float):
        if safe != safe:
            value = ".nan"
        elif safe in (float("inf"), float("-inf")):
            value = ".inf" if safe > 0 else "-.inf"
        else:
            value = repr(safe).lower()
        tag, sty = _FLOAT, None
    elif safe is None:
        tag, value, sty = _NULL, "null", None
    elif isinstance(safe, str):
        if plain_source and _TIMESTAMP in (_resolve11(safe), _resolve12(safe)):
            raise _Decline  # a plain date: the round trip keeps it as written
        tag, value, sty = _STR, safe, style(safe, flow)
    else:
        raise _Decline
    return value, sty, (_resolve12(value) == tag, tag == _STR, True)
