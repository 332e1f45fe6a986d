"""kbtool/fastquery.py: the options it reads itself, and what it leaves to the full CLI."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from kbtool import fastquery
from tests.util import DATA

FIX = DATA / "kb_fixture"


@pytest.mark.parametrize(("argv", "want"), [
    (["--gpu", "h100", "--ctx", "128k"], {"gpu": "h100", "ctx": "128k"}),
    (["--gpu=h100", "--kv=fp8", "--json"], {"gpu": "h100", "kv": "fp8", "json": True}),
    (["--kernel", "a", "--kernel", "b", "--lib", "x=1"], {"kernel": ["a", "b"], "lib": ["x=1"]}),
    (["--gpus", "8", "--head-dim", "128", "--util", ".8"], {"gpus": 8, "head_dim": 128, "util": 0.8}),
    (["--gpu", "a", "--gpu", "b"], {"gpu": "b"}),  # a repeated single option: the last one, as click does
    (["--explain", "--fail-on-no", "--kb", "/x"], {"explain": True, "fail_on_no": True, "kb": "/x"}),
])
def test_parse_reads_plain_options(argv: list[str], want: dict[str, object]) -> None:
    assert fastquery.parse(argv) == want


@pytest.mark.parametrize("argv", [
    ["--help"], ["--no-cache", "--gpu", "h100"], ["--gp", "h100"], ["h100"], ["--gpu"], ["--gpu", "--ctx"],
    ["--gpus", "+2"], ["--gpus", "2.0"], ["--util", "1e-1"], ["--json=true"], ["--ctx", "-5"],
])
def test_parse_leaves_the_rest_to_the_full_cli(argv: list[str]) -> None:
    assert fastquery.parse(argv) is None


def test_a_terminal_goes_to_the_full_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rich styles what a terminal shows, so the fast path steps aside (even with a fresh image)."""
    from kbtool.render import sink
    from kbtool.store.cache import load_image

    root = tmp_path / "records"
    shutil.copytree(FIX, root)
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("KB_NO_CACHE", raising=False)
    load_image(root)  # writes the image
    argv = ["--kb", str(root), "--gpu", "gpu-hopper"]
    monkeypatch.setattr("sys.stdout", io.StringIO())
    monkeypatch.setattr("sys.stderr", io.StringIO())
    answered = fastquery.run(argv)
    assert answered is not None and answered[0].startswith("verdict:") and answered[2] == 0
    monkeypatch.setattr(sink, "wants_rich", lambda stream, environ=None: True)
    assert fastquery.run(argv) is None
