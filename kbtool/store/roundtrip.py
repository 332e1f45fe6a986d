"""Round-trip YAML for edits: comments, key order and flow/block style survive; writes are atomic.

Reads for queries and validation never come here (see kbtool/store/reader.py). `kb fmt` and write-back use
`load`/`dump`, which keep comments, and `write_text`, which replaces a file atomically.
"""

from __future__ import annotations

import importlib
import io
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.representer import RoundTripRepresenter

from kbtool.errors import InvalidRecordError, WriteError

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


def write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically (the atomic writer of kbtool.store.writer where it exists)."""
    try:
        writer = importlib.import_module("kbtool.store.writer")
    except ImportError:
        writer = None
    fn = getattr(writer, "atomic_write", None)
    if callable(fn):
        fn(path, text)
        return
    _atomic_write(path, text)


def _atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise WriteError(f"cannot write {path}: {e.strerror or e}", fix="check the folder's permissions") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise WriteError(f"cannot write {path}: {e.strerror or e}", fix="check the file's permissions") from None
