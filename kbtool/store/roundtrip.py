"""Round-trip YAML for edits: comments, key order and flow/block style survive; writes are atomic.

Reads for queries and validation never come here (see kbtool/store/reader.py). `kb fmt` and write-back use
`load`/`dump`, which keep comments, and `write_text`, which replaces a file atomically.
"""

from __future__ import annotations

import io
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.representer import RoundTripRepresenter

from kbtool.errors import InvalidRecordError

WIDTH = 120
_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)


def _null(representer: RoundTripRepresenter, _: None) -> Any:
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def yaml_rt() -> YAML:
    """A round-trip YAML instance with kb's layout: width 120, 2-space indents, sequences not indented."""
    y = YAML(typ="rt")
    y.width = WIDTH
    y.indent(mapping=2, sequence=2, offset=0)
    y.preserve_quotes = True
    y.allow_duplicate_keys = False
    y.representer.add_representer(type(None), _null)
    return y


def load(text: str, name: str = "<input>") -> Any:
    """Parse YAML text keeping comments and styles. Malformed input raises InvalidRecordError."""
    try:
        return yaml_rt().load(text)
    except YAMLError as e:
        raise InvalidRecordError(f"{name}: malformed YAML: {e}".splitlines()[0],
                                 fix="run `kb validate` for the located error") from None


def dump(data: Any) -> str:
    """Serialize round-trip data. Trailing blanks at line ends (left by line folding) are removed."""
    buf = io.StringIO()
    yaml_rt().dump(data, buf)
    return _TRAILING.sub("", buf.getvalue())
