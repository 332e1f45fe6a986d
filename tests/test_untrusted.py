"""Issue 30's hostile classes through the real CLI: exit 0/1/2 only, no traceback, no raw control character in
the output, the tree unchanged, nothing hanging (a FIFO anywhere answers within 5 s)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbtool.escape import CONTROL, escape
from tests.util import DATA, ROOT, run_kb

FIXTURE = DATA / "kb_fixture"
RAW = CONTROL  # what must never reach a terminal


def _tree(tmp: Path) -> Path:
    root = tmp / "records"
    shutil.copytree(FIXTURE, root)
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def _kb(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbtool", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1", "KB_NO_CACHE": "1"})


def _clean(out: str) -> None:
    assert "Traceback" not in out
    assert RAW.search(out) is None, repr(RAW.search(out))


def test_escape_shows_c0_c1_and_esc() -> None:
    assert escape("a\x1b]0;t\x07b\x9b2J\x9dc\td\ne\r") == "a\\x1b]0;t\\x07b\\x9b2J\\x9dc\td\ne\\x0d"
    assert escape("plain") == "plain"


def test_validate_reports_fifo_symlinked_folder_and_esc_name(tmp_path: Path) -> None:
    """The issue's done-when check, on a small tree (the shipped tree's validate is slower than 1 s here)."""
    root = _tree(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.mkfifo(root / "models" / "pipe.yaml")
    (root / "models" / "linked").symlink_to(outside)
    rec = sorted((root / "models").glob("fx-*.yaml"))[0]
    text = rec.read_text()
    rec.write_text(text.replace("\nname: ", '\nname: "\\e]0;pwned\\a"\nx_: ', 1).replace("\nx_: ", "\n#", 1))
    t = time.monotonic()
    proc = _kb("validate", "--kb", str(root), "--format", "json", timeout=5)
    assert time.monotonic() - t < 5
    assert proc.returncode == 1, proc.stderr
    found = {(f["code"], f["file"]) for f in json.loads(proc.stdout)["findings"]}
    assert ("KB100", "records/models/pipe.yaml") in found
    assert ("KB100", "records/models/linked") in found
    assert ("KB404", f"records/models/{rec.name}") in found
    text_out = _kb("validate", "--kb", str(root), timeout=5)
    _clean(text_out.stdout + text_out.stderr)


def test_show_and_list_escape_record_text(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    rec = sorted((root / "models").glob("fx-*.yaml"))[0]
    rid = rec.stem
    text = rec.read_text()
    lines = [ln if not ln.startswith("name:") else 'name: "x\\e]0;title\\a \\e[2J \\x9b2J \\x9d0;t"'
             for ln in text.splitlines()]
    rec.write_text("\n".join(lines) + "\n")
    for args in (["show", rid], ["list", "model"]):
        r = run_kb(*args, "--kb", str(root))
        assert r.code in (0, 1, 2), r
        _clean(r.out + r.err)
        if args[0] == "show":
            assert "\\x1b]0;title" in r.out


def test_fifo_as_config_evidence_and_record_never_hangs(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    before = _snapshot(root)
    d = tmp_path / "model"
    d.mkdir()
    os.mkfifo(d / "config.json")
    ev = tmp_path / "ev"
    ev.mkdir()
    os.mkfifo(ev / "pipe.yaml")
    cases = [["model", "import", str(d / "config.json"), "--kb", str(root)],
             ["query", "--gpu", "h100", "--model", str(d / "config.json"), "--kb", str(root)],
             ["query", "--gpu", "h100", "--vllm-args", f"serve {d}", "--kb", str(root)],
             ["probe", "apply", str(ev / "pipe.yaml"), "--kb", str(root)]]
    for argv in cases:
        t = time.monotonic()
        proc = _kb(*argv, timeout=5)
        assert time.monotonic() - t < 5
        assert proc.returncode == 2, (argv, proc.stderr)
        assert "named pipe" in proc.stderr, (argv, proc.stderr)
        _clean(proc.stdout + proc.stderr)
    assert _snapshot(root) == before


@pytest.mark.parametrize("raw", [b"not json at all", b"\xff\xfe garbage", b"[1, 2"])
def test_probe_apply_non_json_or_non_utf8_is_exit_2(tmp_path: Path, raw: bytes) -> None:
    root = _tree(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / "probe-run.json").write_bytes(raw)
    (out / "ev.yaml").write_bytes(raw)
    r = run_kb("probe", "apply", str(out), "--kb", str(root))
    assert r.code == 2, r
    _clean(r.out + r.err)


BASE = DATA / "hf-configs" / "llama-3.1-8b" / "config.json"  # 32 query heads, 8 KV heads, head dim 128
BAD_CONFIGS = [
    ({"num_key_value_heads": 64}, "num_key_value_heads is 64, which does not divide num_attention_heads 32"),
    ({"num_key_value_heads": 6}, "num_key_value_heads is 6, which does not divide"),
    ({"num_key_value_heads": 0}, "num_key_value_heads is 0, not a positive whole number"),
    ({"num_key_value_heads": 2.5}, "num_key_value_heads is 2.5, not a positive whole number"),
    ({"head_dim": 64.5}, "head_dim is 64.5, not a positive whole number"),
    ({"num_attention_heads": "32"}, "num_attention_heads is '32', not a positive whole number"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": float("inf")}}, "rope_scaling.factor is inf"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": float("nan")}}, "rope_scaling.factor is nan"),
    ({"quantization_config": "fp8"}, "quantization_config is str, not an object"),
    ({"text_config": {"num_attention_heads": 8, "num_key_value_heads": 16}}, "text_config.num_key_value_heads"),
]


def _config(tmp: Path, change: dict[str, object]) -> Path:
    data = json.loads(BASE.read_text())
    data.update(change)
    d = tmp / "m"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(data))  # json.dumps writes Infinity / NaN as published files do
    return d / "config.json"


@pytest.mark.parametrize("change,message", BAD_CONFIGS, ids=[m[:30] for _, m in BAD_CONFIGS])
def test_impossible_models_are_refused_before_use_or_write(tmp_path: Path, change: dict[str, object],
                                                           message: str) -> None:
    root = _tree(tmp_path)
    before = _snapshot(root)
    cfg = _config(tmp_path, change)
    r = run_kb("model", "import", str(cfg), "--kb", str(root))
    assert r.code == 2, r
    assert message in r.err, r.err
    _clean(r.out + r.err)
    assert _snapshot(root) == before
    q = run_kb("query", "--gpu", "h100", "--model", str(cfg), "--kb", str(root))
    assert q.code == 2 and message in q.err, q


@pytest.mark.parametrize("raw", [b'{"num_attention_heads": 1e400}', b'{"num_attention_heads": ' + b"9" * 5000 + b"}",
                                 b"[" * 100 + b"]" * 100, b'"a string"', b"\xff"])
def test_malformed_configs_are_exit_2(tmp_path: Path, raw: bytes) -> None:
    root = _tree(tmp_path)
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_bytes(raw)
    r = run_kb("model", "import", str(d / "config.json"), "--kb", str(root))
    assert r.code == 2, r
    _clean(r.out + r.err)


def test_hf_quant_config_as_a_list_is_exit_2(tmp_path: Path) -> None:
    cfg = _config(tmp_path, {})
    (cfg.parent / "hf_quant_config.json").write_text("[1, 2]")
    r = run_kb("model", "import", str(cfg), "--stdout")
    assert r.code == 2 and "hf_quant_config.json: is a JSON list, not an object" in r.err, r
