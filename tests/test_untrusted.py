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
            assert "\\x1b]0;title\\x07" in r.out  # the BEL shown too (rich would drop it unescaped)


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


def test_matrix_out_to_a_missing_folder_is_exit_2(tmp_path: Path) -> None:
    r = run_kb("matrix", "--out", str(tmp_path / "missing" / "dir" / "x.md"), "--kb", str(FIXTURE))
    assert r.code == 2 and f"no folder {tmp_path / 'missing' / 'dir'}" in r.err, r
    assert not (tmp_path / "missing").exists()


def test_a_full_disk_leaves_the_record_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from kbtool.errors import WriteError
    from kbtool.store import writer

    target = tmp_path / "rec.yaml"
    target.write_text("id: old\n")

    class Full:
        def __init__(self, *a: object, **k: object) -> None:
            pass

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *a: object) -> None:
            pass

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer.os, "fdopen", lambda fd, mode: (os.close(fd), Full())[1])
    with pytest.raises(WriteError, match=f"cannot write {target}: No space left on device"):
        writer.atomic_write(target, "id: new\n")
    assert target.read_text() == "id: old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.yaml"]  # no temp file left


def test_a_stale_lock_is_taken_over_and_a_held_one_waited_on(tmp_path: Path) -> None:
    import fcntl

    from kbtool.errors import WriteError
    from kbtool.store.writer import file_lock

    target = tmp_path / "rec.yaml"
    lock = tmp_path / ".rec.yaml.lock"
    lock.write_text("999999999")  # a writer killed while holding it: its pid is gone, the kernel dropped flock
    t = time.monotonic()
    with file_lock(target, timeout=2):
        assert lock.read_text() == str(os.getpid())
    assert time.monotonic() - t < 1
    fd = os.open(lock, os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a live holder
    try:
        with pytest.raises(WriteError, match="locked by another writer"), file_lock(target, timeout=0.2):
            pass
    finally:
        os.close(fd)


def test_model_import_refuses_a_models_folder_leaving_the_tree(tmp_path: Path) -> None:
    root = tmp_path / "records"
    root.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "models").symlink_to(outside)
    r = run_kb("model", "import", str(BASE), "--kb", str(root))
    assert r.code == 2 and "outside the records tree" in r.err, r
    assert list(outside.iterdir()) == []


def test_read_only_target_is_exit_2(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes through read-only modes")
    root = _tree(tmp_path)
    (root / "models").chmod(0o555)
    try:
        r = run_kb("model", "import", str(BASE), "--kb", str(root))
        assert r.code == 2 and str(root / "models") in r.err, r
    finally:
        (root / "models").chmod(0o755)


@pytest.mark.parametrize("argv,message", [
    (["--gpu", "h100", "--vllm-args", "serve llama-3.1-8b -tp 0"], "--vllm-args: -tp 0 must be at least 1"),
    (["--gpu", "h100", "--vllm-args", "serve llama-3.1-8b --tensor-parallel-size=0"],
     "--tensor-parallel-size 0 must be at least 1"),
    (["--gpu", "h100", "--sglang-args", "python -m sglang.launch_server --model-path llama-3.1-8b --tp-size 0"],
     "--sglang-args: --tp-size 0 must be at least 1"),
    (["--gpu", "h100", "--head-dim", "2147483647"], "--head-dim: 2147483647 is beyond what kb models"),
    (["--gpu", "h100", "--reserve", "1e400"], "--reserve: '1e400' is beyond any GPU's memory"),
    (["--gpu", "h100", "--gpus", "1000000"], "--gpus: 1000000 is beyond what kb models"),
    (["--gpu", "h100", "--model", "llama-3.1-8b", "--gpus", "3"], "--gpus 3: llama-3.1-8b's 32 attention heads"),
    (["--gpu", "h100", "--vllm-args", "serve llama-3.1-8b -tp 3"], "--vllm-args -tp 3: llama-3.1-8b's 32"),
    (["--gpu", "h100", "--kv", "fp8", "--vllm-args", "serve llama-3.1-8b --kv-cache-dtype bf16"],
     "--kv fp8 conflicts with --vllm-args --kv-cache-dtype bf16"),
    (["--gpu", "h100", "--kv", "fp8", "--vllm-args", "serve llama-3.1-8b --kv-cache-dtype auto"],
     "--kv fp8 conflicts with --vllm-args --kv-cache-dtype auto"),
    (["--gpu", "h100", "--kv", "fp8", "--sglang-args",
      "python -m sglang.launch_server --model-path llama-3.1-8b --kv-cache-dtype auto"],
     "--kv fp8 conflicts with --sglang-args --kv-cache-dtype auto"),
])
def test_no_silent_substitution(argv: list[str], message: str) -> None:
    r = run_kb("query", *argv)
    assert r.code == 2 and message in r.err, r
    _clean(r.out + r.err)


def test_matrix_head_dim_zero_is_an_error() -> None:
    r = run_kb("matrix", "--head-dim", "0", "--kb", str(FIXTURE))
    assert r.code == 2 and "--head-dim: 0 must be a positive integer" in r.err, r
