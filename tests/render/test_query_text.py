"""`kb query`'s plain text (stdout not a terminal) against golden files (KB_REGEN=1 rewrites them).

Each case runs `python -m kbtool query ARGS` in a subprocess with stdout, stderr and stdin not terminals, the
session's KB cache (tests/conftest.py; content-addressed, so the answer is a cold run's) and none of the
variables that change rich's output (COLUMNS, NO_COLOR, ...) set unless the case sets them. The file holds the
arguments, the exit code, stdout and stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.util import DATA, ROOT

HERE = ROOT / "tests" / "golden" / "query-text"
FIX = str(DATA / "kb_fixture")
F = ["--kb", FIX]
H100 = ["--gpu", "h100", "--ctx", "128k", "--kv", "fp8"]
H200 = ["--gpu", "h200", "--model", "llama-3.1-8b", "--ctx", "16k"]
ROWS = ["--ctx", "128k", "--kv", "fp8"]

# name -> (arguments, extra environment)
CASES: dict[str, tuple[list[str], dict[str, str]]] = {
    # shipped records
    "h100-128k-fp8": (H100, {}),
    "h100-128k-fp8-explain": ([*H100, "--explain"], {}),
    "h100-qwen3-next": ([*H100, "--model", "qwen3-next-80b-a3b"], {}),
    "h100-llama-405b": ([*H100, "--model", "llama-3.1-405b"], {}),
    "h100-dsv3-vllm": ([*H100, "--model", "deepseek-v3", "--engine", "vllm"], {}),
    "h100-dsv3-vllm-explain": ([*H100, "--model", "deepseek-v3", "--engine", "vllm", "--explain"], {}),
    "h100-decode": ([*H100, "--phase", "decode"], {}),
    "h100-flashinfer-0.6.18": ([*H100, "--lib", "flashinfer=0.6.18", "--head-dim", "256"], {}),
    "h100-kernel-flashmla-dense": ([*H100, "--kernel", "flashmla-dense-decode"], {}),
    "b200-kernel-flashmla-sparse": (["--gpu", "b200", "--model", "deepseek-v3", "--kv", "fp8", "--gpus", "8",
                                     "--kernel", "flashmla-sparse-decode", "--ctx", "128k"], {}),
    "b200-dsv3-vllm-bf16": (["--gpu", "b200", "--model", "deepseek-v3", "--kv", "bf16", "--engine", "vllm",
                             "--block-size", "64", "--lib", "vllm=0.11.0"], {}),
    "mi300x-llama-70b": (["--gpu", "mi300x", "--model", "llama-3.1-70b", "--ctx", "32k"], {}),
    "h200-measured": (H200, {}),
    "h200-measured-explain": ([*H200, "--explain"], {}),
    "h200-measured-decode": ([*H200, "--phase", "decode", "--batch", "8"], {}),
    "rows-128k-fp8": (ROWS, {}),
    "rows-128k-fp8-two-kernels-explain": ([*ROWS, "--kernel", "flash-attention-3", "--kernel", "flashinfer-fa2",
                                           "--explain"], {}),
    "fail-on-no": (["--gpu", "h100", "--model", "llama-3.1-405b", "--ctx", "128k", "--fail-on-no"], {}),
    "unknown-gpu": (["--gpu", "h1000"], {}),
    "unknown-model": (["--gpu", "h100", "--model", "lama-3.1-70b"], {}),
    "bad-ctx": (["--gpu", "h100", "--ctx", "12q"], {}),
    "missing-inputs": ([], {}),
    # issue 17: the headline fits 25 lines at 80 columns; --explain lists everything
    "seen-8-h100-128k-fp8-columns-80": (H100, {"COLUMNS": "80"}),
    "seen-8-h100-128k-fp8-explain-columns-80": ([*H100, "--explain"], {"COLUMNS": "80"}),
    "seen-8-gpt-oss-h100-vllm-columns-80": (["--gpu", "h100", "--model", "gpt-oss-120b", "--ctx", "128k",
                                             "--engine", "vllm"], {"COLUMNS": "80"}),
    "seen-8-a100-columns-80": (["--gpu", "a100", "--head-dim", "128", "--kv", "bf16", "--ctx", "8k"],
                               {"COLUMNS": "80"}),
    # session 4 audit: past the model's max_position_embeddings only a shorter ctx helps
    "audit-llama-8b-1m-columns-80": (["--gpu", "h100", "--model", "llama-3.1-8b", "--ctx", "1m"], {"COLUMNS": "80"}),
    # vLLM's headline names the backends it refused ahead of its choice, not those behind it
    "audit-h100-llama-8b-vllm-columns-80": (["--gpu", "h100", "--model", "llama-3.1-8b", "--ctx", "32k", "--engine",
                                             "vllm"], {"COLUMNS": "80"}),
    # a decode batch that does not fit: a smaller batch is one way out
    "audit-h100x2-llama-70b-decode-batch-64": (["--gpu", "h100", "--gpus", "2", "--model", "llama-3.1-70b", "--ctx",
                                                "8k", "--kv", "fp8", "--weights", "fp8", "--phase", "decode",
                                                "--batch", "64"], {"COLUMNS": "80"}),
    # MLA's latent is replicated on every GPU: more GPUs cannot fit this batch
    "audit-h200x8-dsr1-decode-batch-64": (["--gpu", "h200", "--gpus", "8", "--model", "deepseek-r1", "--ctx", "128k",
                                           "--kv", "fp8", "--phase", "decode", "--batch", "64"], {"COLUMNS": "80"}),
    "audit-rows-llama-8b-256k-columns-80": (["--model", "llama-3.1-8b", "--ctx", "256k"], {"COLUMNS": "80"}),
    # weights alone exceed the GPU: fp8 KV is no way to fit
    "audit-h200-qwen3-next-weights-exceed": (["--gpu", "h200", "--model", "qwen3-next-80b-a3b", "--ctx", "128k"],
                                             {"COLUMNS": "80"}),
    # the fixture KB
    "fx-head-dim-reject": ([*F, "--gpu", "hop", "--head-dim", "96", "--lib", "cuda=12.8", "--batch", "1"], {}),
    "fx-unknown-cuda": ([*F, "--gpu", "hop", "--head-dim", "128", "--kernel", "k-gqa"], {}),
    "fx-all-known-yes": ([*F, "--gpu", "hop", "--head-dim", "128", "--lib", "cuda=12.8", "--batch", "4", "--kv",
                          "bf16", "--kernel", "k-gqa"], {}),
    "fx-disputed-arch-explain": ([*F, "--gpu", "BW", "--head-dim", "128", "--lib", "cuda=12.8", "--batch", "1",
                                  "--explain"], {}),
    "fx-refuted-not-enforced-explain": ([*F, "--gpu", "hop", "--head-dim", "128", "--kv", "fp8", "--phase",
                                         "prefill", "--kernel", "k-prefill", "--explain"], {}),
    "fx-verified-evidence-explain": ([*F, "--gpu", "hop", "--head-dim", "320", "--phase", "prefill", "--kernel",
                                      "k-prefill", "--explain"], {}),
    "fx-untestable": ([*F, "--gpu", "hop", "--model", "fx-small-mla", "--phase", "decode"], {}),
    "fx-caveat-long-ctx": ([*F, "--gpu", "hop", "--head-dim", "128", "--kv", "fp8", "--ctx", "128k", "--lib",
                            "cuda=12.8", "--batch", "1"], {}),
    "fx-engine-both-layers": ([*F, "--gpu", "hop", "--head-dim", "96", "--engine", "vllm", "--block-size", "8",
                               "--lib", "cuda=12.8", "--batch", "1"], {}),
    "fx-engine-mla-explain": ([*F, "--gpu", "bw", "--model", "fx-dsv3", "--engine", "vllm", "--block-size", "64",
                               "--gpus", "8", "--kv", "bf16", "--ctx", "4k", "--explain"], {}),
    "fx-mem-linear": ([*F, "--gpu", "bw", "--model", "fx-hybrid", "--ctx", "256k"], {}),
    "fx-mem-no-fit-405b": ([*F, "--gpu", "hop", "--model", "fx-llama-405b", "--ctx", "128k"], {}),
    "fx-rows": ([*F, *ROWS], {}),
    "fx-rows-explain": ([*F, *ROWS, "--explain"], {}),
    "fx-rows-explain-columns-100": ([*F, *ROWS, "--explain"], {"COLUMNS": "100"}),
    "fx-rows-model-explain-columns-61": ([*F, "--model", "fx-llama-70b", "--ctx", "32k", "--explain"],
                                         {"COLUMNS": "61"}),
}

# variables that change what rich writes; the cases start without them
_RICH_ENV = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CLICOLOR",
             "CLICOLOR_FORCE", "JUPYTER_COLUMNS", "JUPYTER_LINES")


def run_query(args: list[str], extra: dict[str, str] | None = None) -> str:
    """`kb query ARGS` in a subprocess, stdout and stderr piped; the golden text of the run."""
    env = {k: v for k, v in os.environ.items() if k not in _RICH_ENV}
    env.update({"PYTHONIOENCODING": "utf-8", **(extra or {})})  # the session's KB cache (tests/conftest.py)
    res = subprocess.run([sys.executable, "-m", "kbtool", "query", *args], cwd=ROOT, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, timeout=120, check=False)
    text = (f"$ kb query {' '.join(args)}\n"
            + "".join(f"$ env {k}={v}\n" for k, v in sorted((extra or {}).items()))
            + f"--- exit {res.returncode}\n--- stdout\n{res.stdout.decode()}--- stderr\n{res.stderr.decode()}")
    return text.replace(str(ROOT), "<root>")


@pytest.mark.parametrize("name", sorted(CASES))
def test_query_text_golden(name: str) -> None:
    path = HERE / f"{name}.txt"
    got = run_query(*CASES[name])
    if os.environ.get("KB_REGEN"):
        HERE.mkdir(exist_ok=True)
        path.write_bytes(got.encode())
    assert path.exists(), f"missing golden {path.name}: run KB_REGEN=1 pytest {__file__}"
    assert got == path.read_bytes().decode()


def test_no_text_golden_without_a_case() -> None:
    assert {p.stem for p in HERE.glob("*.txt")} <= set(CASES)


def test_a_long_accelerator_id_never_runs_into_its_verdict() -> None:
    """The rows view's first column fits the longest id (nvidia-rtx-pro-6000-blackwell is 29 characters; the column
    was 22 wide, so that row read 'nvidia-rtx-pro-6000-blackwellyes')."""
    text = run_query(ROWS)
    rows = [ln.split() for ln in text.splitlines() if ln.startswith("  nvidia-")]
    assert rows and all(r[1] in ("yes", "no", "conditional", "unknown") for r in rows), rows[:3]
