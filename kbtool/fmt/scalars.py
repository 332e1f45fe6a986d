"""Canonical scalar style.

A string is written plain when plain is safe for both YAML 1.1 readers (PyYAML/libyaml, which kb reads with)
and YAML 1.2 readers (editors, ruamel): it must read back as the same string in both. Otherwise it is single
quoted, or double quoted where it needs escapes. A string with line breaks is a literal block (`|`) outside
flow collections. Booleans are `true`/`false`, nulls `null`, numbers plain decimal. Dates stay plain: kb
reads them as text.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from functools import lru_cache
from typing import cast

import yaml
from ruamel.yaml.nodes import ScalarNode as RScalarNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scalarstring import (
    DoubleQuotedScalarString,
    LiteralScalarString,
    PlainScalarString,
    ScalarString,
    SingleQuotedScalarString,
)

_TEXT = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:timestamp")
_EMITTER = yaml.emitter.Emitter(io.StringIO(), allow_unicode=True)
_R11_RESOLVE = cast(Callable[..., str], yaml.resolver.Resolver().resolve)
_R12_RESOLVE = cast(Callable[..., str], VersionedResolver(version=(1, 2)).resolve)  # ruamel is untyped here


def _reads_as_text(s: str) -> bool:
    return (_R11_RESOLVE(yaml.ScalarNode, s, (True, False)) in _TEXT
            and _R12_RESOLVE(RScalarNode, s, (True, False)) in _TEXT)


@lru_cache(maxsize=4096)
def style(s: str, flow: bool) -> str:
    """'' plain, "'" single, '"' double or '|' literal: the canonical style of `s` in this context."""
    a = _EMITTER.analyze_scalar(s)
    if a.multiline:
        if not flow and a.allow_block and not s.startswith((" ", "\n")) and s.strip():
            return "|"
        return "'" if a.allow_single_quoted else '"'
    if s and _reads_as_text(s) and (a.allow_flow_plain if flow else a.allow_block_plain):
        return ""
    return "'" if a.allow_single_quoted else '"'


_WRAP: dict[str, type[ScalarString]] = {
    "": PlainScalarString,
    "'": SingleQuotedScalarString,
    '"': DoubleQuotedScalarString,
    "|": LiteralScalarString,
}


def restyle(s: str, flow: bool) -> ScalarString:
    wrapped: ScalarString = _WRAP[style(str(s), flow)](str(s))
    return wrapped
