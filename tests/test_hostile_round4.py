"""Issue 48's classes of user input that ended in exit 3 (an internal error) or a hang, through the real CLI: each
is now exit 0, 1 or 2, with no traceback, and a refused write leaves the tree byte-identical."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.util import DATA, ROOT, rm_deep, run_kb

FIXTURE = DATA / "kb_fixture"


def _tree(tmp: Path) -> Path:
    root = tmp / "records"
    shutil.copytree(FIXTURE, root)
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _kb(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbtool", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1", "KB_NO_CACHE": "1", **(env or {})})


def test_an_id_too_long_for_a_file_name_is_a_usage_error(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    before = _snapshot(root)
    r = run_kb("new", "claim", "a" * 300, "--kb", str(root))
    assert (r.code, r.err) == (2, f"error: '{'a' * 40}...' is 300 characters; an id has at most 160\n"
                                  "  fix: use a shorter id (it is also the file name)\n")
    assert _snapshot(root) == before


@pytest.mark.parametrize("where, message", [
    ("/", "/ is the file system root, not a records tree"),
    ("/proc", "/proc is a system folder (/proc), not a records tree"),
    ("/proc/self", "/proc/self is a system folder"),
])
@pytest.mark.parametrize("command", [["query", "--gpu", "h100"], ["validate"], ["list"]])
def test_the_file_system_root_or_proc_as_the_tree_is_refused_at_once(where: str, message: str,
                                                                     command: list[str]) -> None:
    """`KB_RECORDS=/` walked the whole disk; `/proc` ended in PermissionError on /proc/1/cwd."""
    t = time.monotonic()
    r = _kb(*command, env={"KB_RECORDS": where}, timeout=20)
    assert time.monotonic() - t < 10
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"error: {message}") and "Traceback" not in r.stderr
    assert "fix: pass --kb PATH or set KB_RECORDS to a records folder" in r.stderr


def _deep(root: Path, depth: int, record: bool) -> None:
    here = os.getcwd()
    os.chdir(root / "models")
    try:
        for _ in range(depth):
            os.mkdir("d")
            os.chdir("d")
        if record:
            Path("deep.yaml").write_text("id: deep\nkind: nope\n")
    finally:
        os.chdir(here)


def test_a_folder_1200_levels_deep_is_walked_without_recursion(tmp_path: Path) -> None:
    """RecursionError in validate, a cold query and fmt; a realpath per folder also made the walk cubic in depth."""
    root = _tree(tmp_path)
    try:
        _deep(root, 1200, record=True)
        t = time.monotonic()
        v = _kb("validate", "--kb", str(root), "--format", "json")
        assert v.returncode == 1, v.stderr
        assert '"path": "$.kind"' in v.stdout and "deep.yaml" in v.stdout
        f = _kb("fmt", "--check", "--kb", str(root))
        assert f.returncode == 1 and "Traceback" not in f.stderr
        (Path(*[root, "models", *["d"] * 1200]) / "deep.yaml").unlink()
        q = _kb("query", "--kb", str(root), "--gpu", "gpu-hopper", "--ctx", "64k", env={"KB_NO_CACHE": ""})
        assert q.returncode == 0 and "Traceback" not in q.stderr, q.stderr
        assert time.monotonic() - t < 60
    finally:  # pytest's own clean-up of old temporary folders recurses: never leave the deep tree to it
        rm_deep(root / "models" / "d")


def test_output_survives_an_ascii_terminal() -> None:
    """PYTHONIOENCODING=ascii ended in UnicodeEncodeError on the verdict's dash."""
    r = _kb("query", "--gpu", "h100", "--ctx", "128k", env={"PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("verdict: yes \\u2014 nvidia-h100-sxm")
    assert r.stdout.isascii()


def test_importing_into_a_tree_whose_models_folder_is_a_file(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    shutil.rmtree(root / "models")
    (root / "models").write_text("not a folder\n")
    before = _snapshot(root)
    r = run_kb("model", "import", str(DATA / "hf-configs" / "llama-3.1-8b" / "config.json"), "--kb", str(root))
    assert (r.code, r.err) == (2, f"error: cannot write into {root / 'models'}: it is a file, not a folder; nothing "
                                  f"written\n  fix: move {root / 'models'} aside; records of this kind live in that "
                                  "folder\n")
    assert _snapshot(root) == before


@pytest.mark.parametrize("kind", ["fifo", "folder", "char-device-link"])
def test_out_that_is_not_a_regular_file_is_refused_not_replaced(tmp_path: Path, kind: str) -> None:
    """`kb matrix --out /dev/full` said "wrote /dev/full" (exit 0): the temp file was renamed over the device node,
    which, run as root, replaced /dev/full with a regular file. Tested on a FIFO, a folder and a link to a device,
    never on /dev itself, so a regression cannot break the machine again."""
    out = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "folder":
        out.mkdir()
    else:
        out.symlink_to("/dev/null")
    what = {"fifo": "a named pipe (FIFO)", "folder": "a folder", "char-device-link": "a character device"}[kind]
    r = run_kb("matrix", "--out", str(out))
    assert (r.code, r.out) == (2, "")
    assert r.err == (f"error: cannot write {out}: it is {what}, not a regular file; not written\n"
                     "  fix: give the path of a regular file (or leave out --out to print)\n")
    assert out.is_symlink() if kind == "char-device-link" else True
    assert os.path.exists("/dev/null") and not Path("/dev/null").is_file()


def test_the_query_error_handler_works_with_a_half_replaced_install(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A query run while `pip install -e` replaced the package died with two chained tracebacks: the error handler
    itself failed to import kbtool.render.sink."""
    from kbtool import query_cli

    def broken(argv: list[str]) -> int:
        raise ImportError("cannot import name 'solve' from partially initialized module")

    monkeypatch.setitem(sys.modules, "kbtool.render.sink", None)  # `import` of it now raises ImportError
    monkeypatch.setattr(query_cli, "_run", broken)
    assert query_cli.main(["--gpu", "h100"]) == 3
    assert capsys.readouterr().err == (
        "kb: internal error: ImportError: cannot import name 'solve' from partially initialized module (is kb being "
        "reinstalled? run it again when pip is done)\n  please report this (set KB_DEBUG=1 for the traceback)\n")


@pytest.mark.parametrize("argv, module", [(["validate"], "kbtool.cli"), (["query", "--gpu", "h100"],
                                                                         "kbtool.query_cli")])
def test_the_entry_point_says_one_line_when_the_package_cannot_be_imported(argv: list[str], module: str) -> None:
    code = (f"import sys; sys.modules[{module!r}] = None; sys.argv = ['kb', *{argv!r}]\n"
            "from kbtool.launch import main; main()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "KB_DEBUG"})
    assert r.returncode == 3
    assert r.stderr.startswith("kb: cannot start: ModuleNotFoundError: import of ") and "Traceback" not in r.stderr
    assert r.stderr.endswith("(is kb being reinstalled? run it again when pip is done)\n")
