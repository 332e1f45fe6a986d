"""Shared test helpers: run the CLI in-process and capture exit code, stdout and stderr."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "records"
DATA = Path(__file__).resolve().parent / "data"


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_kb(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Result:
    """Call `kb ARGS` the way the console script does (kbtool.cli.main), in this process."""
    from kbtool.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    old = Path.cwd()
    with mock.patch.object(sys, "argv", ["kb", *args]), mock.patch.dict(os.environ, env or {}), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if cwd:
                os.chdir(cwd)
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            os.chdir(old)
    return Result(code, out.getvalue(), err.getvalue())


def load_kb(root: Path):  # type: ignore[no-untyped-def]
    """The records under `root` that validate (kbtool.kb.load_kb without the count of files left out)."""
    from kbtool.kb import load_kb as load

    return load(root)[0]


def hf_cache(cache: Path, repo: str, files: dict[str, bytes], commit: str = "0123456789abcdef" * 2 + "01234567",
             ref: str | None = "main") -> Path:
    """Lay `files` of `repo` out as huggingface_hub's cache does (blobs/, snapshots/COMMIT/ symlinks into them,
    refs/REF holding COMMIT) under `cache`; the snapshot folder."""
    import hashlib

    folder = cache / ("models--" + repo.replace("/", "--"))
    snap = folder / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    (folder / "blobs").mkdir(exist_ok=True)
    for name, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snap / name).symlink_to(os.path.relpath(blob, snap))
    if ref:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / ref).write_text(commit)
    return snap


def rm_deep(top: Path) -> None:
    """Remove a folder tree of any depth without recursion (shutil.rmtree, and pytest's clean-up of old temporary
    folders, end in RecursionError on a tree 1,200 folders deep): bottom-up, with chdir so paths stay short."""
    top = top.absolute()
    if not top.is_dir() or top.is_symlink():
        return
    here = os.getcwd()
    try:
        os.chdir(top)
        depth = 0
        while True:
            subs = [e.name for e in os.scandir(".") if e.is_dir(follow_symlinks=False)]
            if subs:
                os.chdir(subs[0])
                depth += 1
                continue
            for e in os.scandir("."):
                os.unlink(e.name)
            if depth == 0:
                break
            name = os.path.basename(os.getcwd())
            os.chdir("..")
            depth -= 1
            os.rmdir(name)
    finally:
        os.chdir(here)
    top.rmdir()


def load_module(name: str, path: Path):  # type: ignore[no-untyped-def]
    """A probe script that is not a package module (probes/*.py), loaded from its file under `name`."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
