"""The HTML support matrix in a real headless Chromium: it loads without console errors, its script counts
as many cells as the KB has kernels x accelerators, and a screenshot is written.

Needs Debian's `chromium` (installed by .ci/run, which sets KB_REQUIRE_CHROMIUM=1 so that a missing browser
fails there instead of skipping). Artifacts go to $KB_TEST_ARTIFACTS if set, else to pytest's tmp folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kbtool.kb import KB
from kbtool.model import Accelerator, Kernel
from tests.util import run_kb

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]
SELFCHECK = re.compile(r'<pre id="selfcheck"[^>]*>(.*?)</pre>', re.S)


def _browser() -> str:
    exe = shutil.which("chromium")
    if exe is None:
        if os.environ.get("KB_REQUIRE_CHROMIUM"):
            pytest.fail("KB_REQUIRE_CHROMIUM is set but `chromium` is not on PATH")
        pytest.skip("Chromium not installed: `apt-get install -y chromium` (Debian, as root; .ci/run does it)")
    return exe


def chromium(page: Path, tmp: Path, *extra: str) -> tuple[str, list[str]]:
    """Run Chromium on a local file; return (stdout, console lines from its log)."""
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    proc = subprocess.run([_browser(), *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, console


def selfcheck(dom: str) -> dict[str, object]:
    m = SELFCHECK.search(dom)
    assert m, "the page's script did not run (no #selfcheck output in the DOM)"
    out: dict[str, object] = json.loads(m.group(1))
    return out


def _artifacts(tmp_path: Path) -> Path:
    d = Path(os.environ.get("KB_TEST_ARTIFACTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_matrix_page_in_chromium(shipped: KB, tmp_path: Path) -> None:
    _browser()
    art = _artifacts(tmp_path)
    page = art / "matrix.html"
    r = run_kb("matrix", "--format", "html", "--out", str(page))
    assert r.code == 0, r.err
    dom, console = chromium(page, tmp_path, "--dump-dom")
    assert console == [], "console messages:\n" + "\n".join(console)
    check = selfcheck(dom)
    assert check["errors"] == []
    cells = len(shipped.of_kind("kernel", Kernel)) * len(shipped.of_kind("accelerator", Accelerator))
    assert check["cells"] == cells
    data = json.loads(run_kb("matrix", "--json").out)
    counts = {k: v for k, v in data["counts"].items() if v}
    assert check["counts"] == counts
    shot = art / "matrix.png"
    _, console = chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1400,1100")
    assert console == []
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_the_check_catches_a_broken_page(tmp_path: Path) -> None:
    """The same checks fail on a page whose script throws: console errors are seen, the count is missing."""
    _browser()
    page = tmp_path / "broken.html"
    page.write_text('<html><body><table><tr><td class="c"></td></tr></table>'
                    "<script>notDefined();</script></body></html>")
    dom, console = chromium(page, tmp_path, "--dump-dom")
    assert any("notDefined" in ln for ln in console)
    with pytest.raises(AssertionError):
        selfcheck(dom)
