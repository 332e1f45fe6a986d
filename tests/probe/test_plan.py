"""Campaign plans (kbtool/probe/plan.py, issue 48): ids are names checked against their grammar before they touch a
path, the cross product is counted before it is expanded, a plan is read like any untrusted file, and every
problem is a located UsageError (exit 2 through the CLI), never a traceback, a hang or a write outside --out."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbtool.errors import UsageError, WriteError
from kbtool.probe import campaign
from kbtool.probe.plan import GRAMMAR, load_plan, under
from tests.util import ROOT, run_kb

THOUSAND = "[" + ", ".join(f"0.{i}.0" for i in range(1000)) + "]"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)) + "name: *i\n"

# (plan text, exact message after "<path>: ", exact fix)
CASES = {
    "shard-escapes": ("tasks:\n  - {kind: replay, releases: [0.19.1], shards: ['../../../../evil/cc9.0']}\n",
                      "$.tasks[0].shards[0]: '../../../../evil/cc9.0' is not a shard",
                      "write a shard such as cc9.0"),
    "release-escapes": ("tasks:\n  - {kind: replay, releases: ['../../x'], shards: [cc9.0]}\n",
                        "$.tasks[0].releases[0]: '../../x' is not a release", "write a release such as 0.19.1"),
    "release-absolute": ("tasks:\n  - {kind: replay, release: /etc, shards: [cc9.0]}\n",
                         "$.tasks[0].release: '/etc' is not a release", "write a release such as 0.19.1"),
    "probe-slash": ("tasks:\n  - {kind: probe, probe: a/b}\n", "$.tasks[0].probe: 'a/b' is not a probe id",
                    "write a probe id such as vllm-selector"),
    "releases-int": ("tasks:\n  - {kind: replay, releases: 5, shards: [cc9.0]}\n",
                     "$.tasks[0].releases: a list expected, not int ('5')", "write `releases: [...]`"),
    "release-float": ("tasks:\n  - {kind: replay, releases: [0.20], shards: [cc9.0]}\n",
                      "$.tasks[0].releases[0]: a release must be a string, not float ('0.2')", "quote it: '0.2'"),
    "gpus-text": ("tasks:\n  - {kind: probe, probe: p, num_gpus: abc}\n",
                  "$.tasks[0].num_gpus: a number from 0 to 64 expected, got 'abc'", "e.g. num_gpus: 1"),
    "gpus-negative": ("tasks:\n  - {kind: probe, probe: p, num_gpus: -1}\n",
                      "$.tasks[0].num_gpus: a number from 0 to 64 expected, got '-1'", "e.g. num_gpus: 1"),
    "unknown-key": ("tasks:\n  - {kind: probe, probe: p, out: /tmp}\n", "$.tasks[0].out: unknown key",
                    "a task has accelerator_type, kind, num_gpus, probe, probes, release, releases, shard, shards"),
    "cross-product": (f"tasks:\n  - {{kind: replay, releases: {THOUSAND}, shards: [cc9.0, cc8.0], probes: "
                      f"{THOUSAND.replace('.', '-')}}}\n",
                      "$.tasks[0]: the plan expands to more than 10,000 tasks", "split it into smaller plans"),
    "name-not-text": ("name: [1, 2]\ntasks: []\n", "$.name: a plan name must be a string, not list ('[1, 2]')",
                      "write a plan name such as vllm-two-releases"),
    "accelerator-escape": ("tasks:\n  - {kind: probe, probe: p, accelerator_type: \"\\e]0;x\"}\n",
                           "$.tasks[0].accelerator_type: '\\x1b]0;x' is not an accelerator type",
                           "write an accelerator type such as H200"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_plan_is_a_located_usage_error(tmp_path: Path, case: str) -> None:
    text, message, fix = CASES[case]
    plan = tmp_path / "plan.yaml"
    plan.write_text(text)
    t = time.monotonic()
    with pytest.raises(UsageError) as e:
        load_plan(plan)
    assert time.monotonic() - t < 5
    assert str(e.value) == f"{plan}: {message}\n  fix: {fix}"
    assert e.value.exit_code == 2


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "not-utf8", "deep", "alias-bomb", "folder"])
def test_a_plan_file_kb_will_not_read_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    """A FIFO hung, /dev/zero ran out of memory, an alias bomb in `name:` hung; non-UTF-8 and 10,000-deep nesting
    ended in tracebacks."""
    plan = tmp_path / "plan.yaml"
    if kind == "fifo":
        os.mkfifo(plan)
    elif kind == "dev-zero":
        plan.symlink_to("/dev/zero")
    elif kind == "not-utf8":
        plan.write_bytes(b"name: \xff\xfe\ntasks: []\n")
    elif kind == "deep":
        plan.write_text("tasks: " + "[" * 10_000 + "]" * 10_000 + "\n")
    elif kind == "alias-bomb":
        plan.write_text(BOMB + "tasks: []\n")
    else:
        plan.mkdir()
    t = time.monotonic()
    with pytest.raises(UsageError) as e:
        load_plan(plan)
    assert time.monotonic() - t < 5
    assert str(e.value).startswith(str(plan))
    assert {"fifo": "is a named pipe (FIFO), not a regular file; not read", "dev-zero": "is a character device",
            "not-utf8": "not UTF-8: byte 0xff", "deep": "exceeded maximum nesting depth",
            "alias-bomb": ":1: $.b[0]: an alias (*name) where none belong",  # the line of its anchor
            "folder": "is a folder, not a regular file"}[kind] in str(e.value)


def test_under_refuses_what_leads_out(tmp_path: Path) -> None:
    base = tmp_path / "out"
    (base / "ok").mkdir(parents=True)
    assert under(base, "ok/x.json") == base / "ok" / "x.json"
    for rel in ("../x", "a/../../x", "/etc/passwd", ""):
        with pytest.raises(WriteError, match="not a path inside"):
            under(base, rel)
    (base / "link").symlink_to(tmp_path)
    with pytest.raises(WriteError, match=r"resolves to .*, outside .*; not written"):
        under(base, "link/x.json")


def test_a_task_returning_a_path_outside_is_not_written(tmp_path: Path) -> None:
    task = campaign.Task("replay-0.19.1-cc9.0", "replay", release="0.19.1", shard="cc9.0")
    out = tmp_path / "out"
    out.mkdir()
    for rel in ("out/../../evil.json", "replay/../../evil.json", "tests/data/../../../evil", "records/x.yaml"):
        with pytest.raises(WriteError):
            campaign._write(out, tmp_path / "root", task, {rel: b"x"})
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out"]


def test_the_escaping_shard_of_the_issue_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(CASES["shard-escapes"][0])
    before = sorted(tmp_path.rglob("*"))
    r = run_kb("probe", "campaign", str(plan), "--out", str(tmp_path / "out"), "--ray-address", "none")
    assert r.code == 2 and "is not a shard" in r.err and "Traceback" not in r.err
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("where", ["file", "under-file", "dev-full", "read-only"])
def test_an_out_folder_that_cannot_be_written_is_exit_2(tmp_path: Path, where: str) -> None:
    plan = ROOT / "tests" / "data" / "campaign" / "two-releases.yaml"
    out = {"file": tmp_path / "f", "under-file": tmp_path / "f" / "sub", "dev-full": Path("/dev/full"),
           "read-only": tmp_path / "ro"}[where]
    (tmp_path / "f").write_text("keep\n")
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(stat.S_IRUSR | stat.S_IXUSR)
    if where == "read-only" and os.access(tmp_path / "ro", os.W_OK):
        pytest.skip("running as a user that writes anywhere (root)")
    r = run_kb("probe", "campaign", str(plan), "--out", str(out), "--ray-address", "none")
    expect = {"file": f"cannot write {out}: it is a file, not a folder",
              "under-file": f"cannot write {out}: a parent is a file, not a folder",
              "dev-full": "cannot write /dev/full: it is a file, not a folder",
              "read-only": f"cannot write {out}: permission denied"}[where]
    assert r.code == 2, r
    assert expect in r.err and "fix: give --out a writable folder with free space" in r.err
    assert "Traceback" not in r.err
    assert (tmp_path / "f").read_text() == "keep\n"


ID = st.one_of(st.text(max_size=12), st.integers(-5, 10**6), st.floats(), st.none(), st.booleans(),
               st.sampled_from(["..", "../x", "cc9.0", "0.19.1", "/", "a/b", "rocm-gfx942", "vllm-selector"]))
ENTRY = st.fixed_dictionaries({"kind": st.sampled_from(["replay", "probe", "release", "x"])}, optional={
    "releases": st.one_of(ID, st.lists(ID, max_size=3)), "release": ID, "shards": st.lists(ID, max_size=3),
    "probe": ID, "num_gpus": ID, "accelerator_type": ID})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(ENTRY, max_size=3), name=ID)
def test_fuzz_plans(tmp_path: Path, entries: list[dict[str, object]], name: object) -> None:
    """Whatever the plan holds, it loads into tasks whose names fit their grammar, or is a UsageError."""
    import json

    plan = tmp_path / "plan.yaml"
    plan.write_text(json.dumps({"name": name, "tasks": entries}))  # JSON is YAML
    try:
        _, tasks = load_plan(plan)
    except UsageError:
        return
    for t in tasks:
        for what in ("release", "shard", "probe"):
            value = getattr(t, what)
            assert value is None or GRAMMAR[what][0].fullmatch(value), (what, value)
        assert ".." not in t.id and "/" not in t.id
