"""Hostile input: every corpus file and bad query argument exits 1 or 2, fast, located, with no traceback.

Prints a report: inputs tried, exits by code, tracebacks (must be 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.util import DATA

TREE = DATA / "hostile" / "tree"  # a one-record KB: cases stay fast and independent of the shipped records

FILES = sorted((DATA / "hostile" / "files").glob("*.yaml"))
BAD_QUERIES = [
    ["--ctx", "128q"], ["--ctx", "-1"], ["--ctx", "1e99"], ["--ctx", "0"], ["--ctx", ""], ["--ctx", "12.3k"],
    ["--ctx", "1.5"],
    ["--ctx", "99999999999999999999k"], ["--kv", "int3"], ["--kv", ""], ["--gpu", "h1OO"], ["--gpu", "../../etc"],
    ["--model", "no-such-model"], ["--head-dim", "-64"], ["--batch", "0"], ["--gpus", "0"],
    ["--phase", "train"],
    ["--lib", "flashinfer"], ["--lib", "=1.0"], ["--engine", "tgi"], ["--kernel", "fa9"],
]
CHILD = r"""
import json, sys, time, io, contextlib
from kbtool.cli import main
cases = json.loads(sys.stdin.read())
results = []
for argv in cases:
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["kb", *argv]
    t = time.monotonic()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:  # an escape is a bug: report it
            import traceback
            traceback.print_exc(file=err)
            code = -1
    results.append({"argv": argv, "code": code, "seconds": time.monotonic() - t,
                    "out": out.getvalue()[-2000:], "err": err.getvalue()[-2000:]})
print(json.dumps(results))
"""


def _run_all(cases: list[list[str]]) -> list[dict[str, object]]:
    """All cases in one child process (the CLI in-process per case), so a crash cannot hide."""
    proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=900, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return list(json.loads(proc.stdout))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("hostile")
    huge = tmp / "huge-50mb.yaml"
    with huge.open("wb") as fh:
        fh.write(b"id: x\nnotes: '" + b"y" * (50 * 1024 * 1024) + b"'\n")
    link = tmp / "records" / "claims"
    link.mkdir(parents=True)
    (link / "escape.yaml").symlink_to("/etc/passwd")
    (link / "dangling-link.yaml").symlink_to(tmp / "nowhere.yaml")
    return [huge, link / "escape.yaml", link / "dangling-link.yaml"]


def test_hostile_corpus(generated: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert len(FILES) >= 150
    cases = [["validate", str(p), "--format", "json", "--kb", str(TREE)] for p in FILES]
    cases += [["validate", str(generated[0]), "--format", "json", "--kb", str(TREE)]]
    cases += [["validate", "--format", "json", "--kb", str(generated[1].parent.parent)]]
    cases += [["query", "--gpu", "h100", *q] if "--gpu" not in q else ["query", *q] for q in BAD_QUERIES]
    results = _run_all(cases)
    codes = Counter(r["code"] for r in results)
    tracebacks = sum("Traceback" in str(r["out"]) + str(r["err"]) for r in results)
    slow = [r["argv"] for r in results if float(r["seconds"]) > 5.0]  # type: ignore[arg-type]
    with capsys.disabled():
        print(f"\nhostile inputs: {len(results)} tried; exits by code: {dict(sorted(codes.items()))}; "
              f"tracebacks: {tracebacks}; over 5 s: {len(slow)}")
    bad = [(r["argv"], r["code"], str(r["out"])[-300:], str(r["err"])[-300:]) for r in results
           if r["code"] not in (1, 2)]
    assert bad == [], bad[:3]
    assert tracebacks == 0
    assert slow == []
    for r in results:
        if r["argv"][0] == "validate":
            payload = json.loads(str(r["out"]))
            assert payload["findings"], r["argv"]
            for f in payload["findings"]:
                assert f["code"].startswith("KB") and f["file"] and f["path"].startswith("$")
        else:
            assert "error" in str(r["err"]).lower(), r
