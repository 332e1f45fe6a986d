"""`kb model import PATH/config.json [--id ID]`: a model record written from a Hugging Face config."""

from __future__ import annotations

from pathlib import Path

from kbtool.errors import WriteError
from kbtool.fmt.core import canonical
from kbtool.model.common import ID_MAX_LENGTH, ID_PATTERN
from kbtool.store import roundtrip
from kbtool.store.hfconfig_file import read_config
from kbtool.store.writer import atomic_write, file_lock, make_folder


def record_text(config: str, rid: str | None, root: Path) -> tuple[Path, str]:
    """(path, YAML text) of the record for `config` in the records tree `root`."""
    import re

    from kbtool.errors import UsageError

    if rid is not None and len(rid) > ID_MAX_LENGTH:
        raise UsageError(f"--id: '{rid[:40]}...' is {len(rid)} characters; an id has at most {ID_MAX_LENGTH}",
                         fix="use a shorter id (it is also the file name)")
    if rid is not None and not re.fullmatch(ID_PATTERN, rid):
        raise UsageError(f"--id: '{rid}' is not a valid id", fix="use lowercase letters, digits, '.', '+' and '-'")
    rec = read_config(config, rid)
    path = root / "models" / f"{rec['id']}.yaml"
    return path, canonical(roundtrip.dump(rec), path)


def import_model(config: str, rid: str | None, root: Path, *, overwrite: bool = False) -> Path:
    """Write the record; refuses to overwrite an existing one unless asked."""
    path, text = record_text(config, rid, root)
    import os

    real = os.path.realpath(path.parent)
    if not Path(real).is_relative_to(os.path.realpath(root)):  # records/models is a symlink out of the tree
        raise WriteError(f"{path.parent} resolves to {real}, outside the records tree {root}; nothing written",
                         fix="replace the symlinked folder with a real one inside the tree")
    if path.exists() and not overwrite:
        raise WriteError(f"{path} already exists", fix="pass --id ANOTHER-ID, or --force to replace it")
    make_folder(path.parent)
    with file_lock(path):
        atomic_write(path, text, exclusive=not overwrite)
    return path
