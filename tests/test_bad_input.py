"""Bad input (issue #16, Deliver 6): user text is printed as text, absurd numbers are usage errors, one
problem in a record is one finding, every finding comes in one run, and `kb query` will not answer from
records that do not validate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.util import DATA, RECORDS, run_kb

FIX = str(DATA / "kb_fixture")


@pytest.mark.parametrize("args", [
    ["show", "[/x]"],
    ["query", "--gpu", "[/x]"],
    ["matrix", "--attention", "[/x]"],
    ["graph", "neighbors", "[bold]x[/bold]"],
])
def test_markup_in_user_text_is_printed_as_text(args: list[str]) -> None:
    r = run_kb(*args, "--kb", FIX)
    assert r.code == 2, r.err
    assert "Traceback" not in r.out + r.err and "internal error" not in r.err
    assert args[-1] in r.err  # shown verbatim, not read as markup


@pytest.mark.parametrize(("args", "words"), [
    (["--ctx", "9" * 400], "--ctx"),
    (["--head-dim", "99999999999999999999"], "--head-dim"),
    (["--gpu", ""], "--gpu"),
    (["--gpus", "1e999"], "--gpus"),
    (["--util", "nan"], "--util"),
])
def test_absurd_query_inputs_are_usage_errors(args: list[str], words: str) -> None:
    r = run_kb("query", "--kb", FIX, *(["--gpu", "hop"] if "--gpu" not in args else []), *args)
    assert r.code == 2, r.out + r.err
    assert r.err.startswith(f"error: {words}") and "Traceback" not in r.err
    assert len(r.err) < 400  # no echo of 400 digits


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "records"
    shutil.copytree(RECORDS, root)
    return root


@pytest.mark.usefixtures("shipped_verdicts")
def test_one_unknown_key_is_one_finding(tmp_path: Path) -> None:
    """A kernel that fails its schema still exists: the claims about it do not dangle."""
    root = _tree(tmp_path)
    kernel = root / "kernels" / "flash-attention-2.yaml"
    kernel.write_text(kernel.read_text() + "speed: fast\n")
    r = run_kb("validate", "--kb", str(root), "--format", "json")
    errors = [f for f in json.loads(r.out)["findings"] if f["severity"] == "error"]
    assert r.code == 1
    assert [(f["code"], f["path"], f["message"]) for f in errors] == [("KB101", "$.speed", "unknown key 'speed'")]


@pytest.mark.usefixtures("shipped_verdicts")
def test_schema_and_semantic_findings_come_in_one_run(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    kernel = root / "kernels" / "flash-attention-2.yaml"
    kernel.write_text(kernel.read_text() + "speed: fast\n")
    acc = root / "accelerators" / "nvidia-h100-sxm.yaml"
    acc.write_text(acc.read_text().replace("memory_gb: {value: 80,", "memory_gb: {value: -80,"))
    # a subject no engine judge reads: the verdict cache still holds every engine probe's verdicts
    claim = next(p for p in sorted((root / "claims").glob("*.yaml")) if "subject: torch-sdpa-flash" in p.read_text())
    claim.write_text(claim.read_text().replace("subject: torch-sdpa-flash", "subject: no-such-kernel"))
    r = run_kb("validate", "--kb", str(root), "--format", "json")
    codes = {(f["code"], Path(f["file"]).name) for f in json.loads(r.out)["findings"] if f["severity"] == "error"}
    assert ("KB101", "flash-attention-2.yaml") in codes  # schema
    assert any(c[1] == "nvidia-h100-sxm.yaml" for c in codes)  # the negative memory
    assert ("KB202", claim.name) in codes  # a real dangling reference, in the same run


def test_query_refuses_records_that_do_not_validate(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    acc = root / "accelerators" / "nvidia-h100-sxm.yaml"
    acc.write_text(acc.read_text().replace("memory_gb: {value: 80,", "memory_gb: {value: -80,"))
    r = run_kb("query", "--kb", str(root), "--gpu", "h100", "--model", "llama-3.1-8b", "--ctx", "8k",
               env={"KB_CACHE_DIR": str(tmp_path / "cache")})
    assert r.code == 2 and r.out == ""
    assert "do not validate" in r.err and "nvidia-h100-sxm.yaml:" in r.err and "$.memory_gb" in r.err
    assert "GB usable" not in r.err


def test_a_malformed_vllm_backend_record_does_not_stop_the_selector_judge(tmp_path: Path) -> None:
    """The vllm-selector judge reads the engine-backend records itself (when it re-judges, e.g. a stale seed): one
    that is not YAML raised out of it, an internal error of the whole tree's validation; it is skipped there (the
    validator reports the file as KB100) and the others are read."""
    from kbtool.probe.judges import vllm_selector

    root = _tree(tmp_path)
    backend = root / "engine-backends" / "vllm-flash-attn-mla.yaml"
    backend.write_text(backend.read_text() + "id: x\n  bad: [\n")
    got = vllm_selector.backends_of(root)
    assert not any(rid == "vllm-flash-attn-mla" for pairs in got.values() for rid, _name in pairs)
    assert any(rid == "vllm-flash-attn" for pairs in got.values() for rid, _name in pairs)
