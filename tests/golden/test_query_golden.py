"""Golden query/answer pairs: `kb query ... --json` compared as dicts (KB_REGEN=1 rewrites the files).

Cases on the fixture KB (tests/data/kb_fixture) keep the whole JSON answer: they cover each gate family and memory
formula, and the fixture changes only with the code. Cases on the shipped records keep what a reviewer reads
(`view`: verdict, summary, recommended kernels and backends, each kernel's and backend's status and reason codes,
the memory figures) and a digest of every record the answer names (`records`). A record edit changes its digest;
the golden then fails until it is regenerated, so a record change that moves a shipped answer lands with the
golden diff that shows it (CONTRIBUTING.md, "Goldens"). Every JSON answer is validated against
schema/query-answer.schema.json.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kbtool.kb import load_kb
from tests.util import DATA, RECORDS, ROOT, run_kb

HERE = Path(__file__).resolve().parent / "query"
FIX = str(DATA / "kb_fixture")
SCHEMA = json.loads((ROOT / "schema" / "query-answer.schema.json").read_text())

F = ["--kb", FIX]
CASES: dict[str, list[str]] = {
    # gate families on the fixture KB
    "fx-head-dim-reject": [*F, "--gpu", "hop", "--head-dim", "96", "--lib", "cuda=12.8", "--batch", "1"],
    "fx-unknown-cuda": [*F, "--gpu", "hop", "--head-dim", "128", "--kernel", "k-gqa"],
    "fx-all-known-yes": [*F, "--gpu", "hop", "--head-dim", "128", "--lib", "cuda=12.8", "--batch", "4", "--kv",
                         "bf16", "--kernel", "k-gqa"],
    "fx-disputed-arch": [*F, "--gpu", "BW", "--head-dim", "128", "--lib", "cuda=12.8", "--batch", "1"],
    "fx-refuted-not-enforced": [*F, "--gpu", "hop", "--head-dim", "128", "--kv", "fp8", "--phase", "prefill",
                                "--kernel", "k-prefill"],
    "fx-verified-evidence": [*F, "--gpu", "hop", "--head-dim", "320", "--phase", "prefill", "--kernel", "k-prefill"],
    "fx-untestable": [*F, "--gpu", "hop", "--model", "fx-small-mla", "--phase", "decode"],
    "fx-caveat-long-ctx": [*F, "--gpu", "hop", "--head-dim", "128", "--kv", "fp8", "--ctx", "128k", "--lib",
                           "cuda=12.8", "--batch", "1"],
    "fx-scope-excluded": [*F, "--gpu", "hop", "--head-dim", "128", "--lib", "cuda=12.8", "--lib", "libk=2.1",
                          "--batch", "16", "--kernel", "k-gqa"],
    "fx-scope-included": [*F, "--gpu", "hop", "--head-dim", "128", "--lib", "cuda=12.8", "--lib", "libk=1.5",
                          "--batch", "16", "--kernel", "k-gqa"],
    "fx-engine-both-layers": [*F, "--gpu", "hop", "--head-dim", "96", "--engine", "vllm", "--block-size", "8",
                              "--lib", "cuda=12.8", "--batch", "1"],
    "fx-engine-mla": [*F, "--gpu", "bw", "--model", "fx-dsv3", "--engine", "vllm", "--block-size", "64", "--gpus",
                      "8", "--kv", "bf16", "--ctx", "4k"],
    "fx-phase-decode": [*F, "--gpu", "hop", "--head-dim", "128", "--phase", "decode"],
    # memory formulas
    "fx-mem-gqa-llama70": [*F, "--gpu", "bw", "--model", "fx-llama-70b", "--ctx", "32k", "--kv", "bf16"],
    "fx-mem-no-fit-405b": [*F, "--gpu", "hop", "--model", "fx-llama-405b", "--ctx", "128k"],
    "fx-mem-mla-dsv3": [*F, "--gpu", "bw", "--model", "fx-dsv3", "--kv", "bf16", "--gpus", "8", "--ctx", "128k"],
    "fx-mem-sliding": [*F, "--gpu", "bw", "--model", "fx-gemma", "--ctx", "128k", "--batch", "8"],
    "fx-mem-linear": [*F, "--gpu", "bw", "--model", "fx-hybrid", "--ctx", "256k"],
    "fx-mem-diff-kv-dims": [*F, "--gpu", "hop", "--model", "fx-diffkv", "--ctx", "1m"],
    "fx-mem-tp-floor-one-head": [*F, "--gpu", "hop", "--model", "fx-llama-70b", "--gpus", "16", "--ctx", "128k"],
    "fx-mem-util": [*F, "--gpu", "bw", "--model", "fx-llama-70b", "--ctx", "32k", "--util", "0.5"],
    "fx-mem-fp4": [*F, "--gpu", "bw", "--model", "fx-llama-70b", "--ctx", "128k", "--kv", "fp4"],
    "fx-rows-per-accelerator": [*F, "--ctx", "128k", "--kv", "fp8"],
    # exit codes
    "fx-fail-on-no": [*F, "--gpu", "hop", "--model", "fx-llama-405b", "--ctx", "128k", "--fail-on-no"],
    "bad-ctx-zero": [*F, "--gpu", "hop", "--ctx", "0"],
    "bad-ctx-negative": [*F, "--gpu", "hop", "--ctx=-4k"],
    "bad-ctx-garbage": [*F, "--gpu", "hop", "--ctx", "12q"],
    "bad-ctx-fraction": [*F, "--gpu", "hop", "--ctx", "1.5"],
    "bad-kv": [*F, "--gpu", "hop", "--kv", "int8"],
    "bad-lib": [*F, "--gpu", "hop", "--lib", "flashinfer"],
    "missing-inputs": [*F],
    "unknown-gpu": ["--gpu", "h1000"],
    "unknown-model": ["--gpu", "h100", "--model", "lama-3.1-70b"],
    # the done-when queries on the shipped records
    "shipped-h100-128k-fp8": ["--gpu", "h100", "--ctx", "128k", "--kv", "fp8"],
    "shipped-h100-405b-no-fit": ["--gpu", "h100", "--model", "llama-3.1-405b", "--ctx", "128k"],
    "shipped-b200-dsv3-vllm": ["--gpu", "b200", "--model", "deepseek-v3", "--kv", "bf16", "--engine", "vllm"],
    # issue 44: the sparse-MLA indexer key cache planned with the latent as one UniformTypeKVCacheSpecs group
    "issue44-h200x8-dsv32-vllm": ["--gpu", "h200", "--gpus", "8", "--model", "deepseek-v3.2", "--ctx", "128k",
                                  "--engine", "vllm"],
    "shipped-rows-128k-fp8": ["--ctx", "128k", "--kv", "fp8"],
    "shipped-h200-llama70-mem": ["--gpu", "h200", "--model", "llama-3.1-70b", "--ctx", "128k", "--kv", "bf16"],
    "shipped-dsv3-flashmla-fp8": ["--gpu", "b200", "--model", "deepseek-v3", "--kv", "fp8", "--gpus", "8",
                                  "--kernel", "flashmla-sparse-decode", "--ctx", "128k"],
    # issue 17, "What was seen": one case per bullet (each answer differs from c6c02be's)
    "seen-1-mi300x-llama70-128k-fp8": ["--gpu", "mi300x", "--model", "llama-3.1-70b", "--ctx", "128k", "--kv",
                                       "fp8"],
    "seen-1-math-sdpa-workspace": ["--gpu", "h100", "--model", "llama-3.1-70b", "--gpus", "8", "--ctx", "128k",
                                   "--kv", "bf16", "--kernel", "torch-sdpa-math"],
    "seen-2-sdpa-bf16-q-fp8-kv": ["--gpu", "h100", "--ctx", "32k", "--kv", "fp8", "--kernel", "torch-sdpa-flash",
                                  "--kernel", "torch-sdpa-efficient", "--kernel", "torch-sdpa-cudnn", "--kernel",
                                  "torch-sdpa-math", "--kernel", "flashinfer-cudnn"],
    "seen-2-fa3-fp4": ["--gpu", "h100", "--ctx", "32k", "--kv", "fp4", "--kernel", "flash-attention-3"],
    "seen-3-fa3-without-cuda": ["--gpu", "h100", "--ctx", "128k", "--kv", "fp8", "--kernel", "flash-attention-3"],
    "seen-3-fa3-assume-none": ["--gpu", "h100", "--ctx", "128k", "--kv", "fp8", "--kernel", "flash-attention-3",
                               "--assume", "none"],
    "seen-3-fa2-without-block-size": ["--gpu", "a100", "--ctx", "32k", "--kv", "bf16", "--kernel",
                                      "flash-attention-2"],
    "seen-3-cuda-option": ["--gpu", "h100", "--ctx", "128k", "--kv", "fp8", "--kernel", "flash-attention-3",
                           "--cuda", "12.2"],
    "seen-4-qwen3-next-h100": ["--gpu", "h100", "--model", "qwen3-next-80b-a3b", "--ctx", "128k", "--kv", "bf16"],
    "seen-4-qwen3-next-h200": ["--gpu", "h200", "--model", "qwen3-next-80b-a3b", "--ctx", "128k", "--kv", "bf16"],
    "seen-4-qwen3-next-b200": ["--gpu", "b200", "--model", "qwen3-next-80b-a3b", "--ctx", "128k", "--kv", "bf16"],
    "seen-5-a100-fa4": ["--gpu", "a100", "--head-dim", "128", "--kv", "bf16", "--ctx", "8k"],
    "seen-6-gpt-oss-h100": ["--gpu", "h100", "--model", "gpt-oss-120b", "--ctx", "128k"],
    "seen-6-gpt-oss-h100-vllm": ["--gpu", "h100", "--model", "gpt-oss-120b", "--ctx", "128k", "--engine", "vllm"],
    "seen-6-gpt-oss-a100-vllm": ["--gpu", "a100", "--model", "gpt-oss-120b", "--ctx", "128k", "--engine", "vllm"],
    "seen-7-h100-pcie-128k-fp8": ["--gpu", "h100-pcie", "--ctx", "128k", "--kv", "fp8"],
    "seen-7-h100-ctx-131072": ["--gpu", "h100", "--ctx", "131072", "--kv", "fp8"],
    "seen-7-h100-vllm-order": ["--gpu", "h100", "--ctx", "128k", "--kv", "fp8", "--engine", "vllm"],
    # session 4 audit: a ctx beyond the model's max_position_embeddings is a "no" even where memory fits
    "audit-ctx-over-model-b200": ["--gpu", "b200", "--model", "llama-3.1-8b", "--ctx", "256k"],
    "audit-ctx-over-model-vllm": ["--gpu", "b200", "--model", "llama-3.1-8b", "--ctx", "256k", "--engine", "vllm"],
    # FA-4 takes fp16/bf16/fp8 only (no NVFP4 KV), with q, k, v of one dtype
    "audit-b200-nvfp4-fa4": ["--gpu", "b200", "--model", "llama-3.1-8b", "--ctx", "128k", "--kv", "nvfp4",
                             "--kernel", "flash-attention-4"],
    "audit-b200-dsv3-fp8-fa4": ["--gpu", "b200", "--gpus", "8", "--model", "deepseek-v3", "--ctx", "128k", "--kv",
                                "fp8"],
    # Gemma 4's full-attention layers have head_dim 512: FA-3 (<= 256) cannot serve the model
    "audit-h100-gemma4-head-dim-512": ["--gpu", "h100", "--model", "gemma-4-26b-a4b", "--ctx", "128k"],
    # vLLM on AMD walks its ROCm list (ROCM_ATTN first; sink models fall through to TRITON_ATTN)
    "audit-mi300x-llama70-vllm-rocm": ["--gpu", "mi300x", "--model", "llama-3.1-70b", "--ctx", "128k", "--kv", "fp8",
                                       "--engine", "vllm"],
    "audit-mi300x-gpt-oss-vllm-rocm": ["--gpu", "mi300x", "--model", "gpt-oss-120b", "--ctx", "128k", "--engine",
                                       "vllm"],
}


def on_shipped(args: list[str]) -> bool:
    return "--kb" not in args


def _codes(items: list[dict[str, Any]] | None) -> list[str]:
    """One line a kernel or backend, in the answer's order: "id: status (CODE CODE)"."""
    out = []
    for k in items or []:
        codes = sorted({str(r.get("code")) for r in k.get("reasons") or [] if isinstance(r, dict)})
        out.append(f"{k.get('id')}: {k.get('status')}" + (f" ({' '.join(codes)})" if codes else ""))
    return out


MEMORY = ("fits", "kv_bytes", "kv_bytes_per_token", "weights_bytes", "available_bytes", "capacity_bytes", "max_ctx",
          "gpus_to_fit", "ctx_limit")


def view(answer: dict[str, Any]) -> dict[str, Any]:
    """What a reviewer reads of an answer (one per row for the one-row-per-accelerator answer)."""
    if "rows" in answer:
        return {"summary": answer.get("summary"), "rows": [view(r) for r in answer["rows"]]}
    memory = answer.get("memory") or {}
    engine = answer.get("engine") or {}
    return {"verdict": answer.get("verdict"), "summary": answer.get("summary"),
            "recommended": answer.get("recommended"), "kernels": _codes(answer.get("kernels")),
            "backends": _codes(answer.get("backends")), "engine_selected": engine.get("selected"),
            "memory": {k: memory.get(k) for k in MEMORY if k in memory} or None}


@cache
def _kb_records() -> dict[str, str]:
    kb, _ = load_kb(RECORDS)
    return {r.id: hashlib.sha256(r.model_dump_json().encode()).hexdigest()[:16] for r in kb}


def record_digests(answer: Any) -> dict[str, str]:
    """id -> digest of the record's content, for every record id the answer names anywhere."""
    digests, found = _kb_records(), set()

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str) and x in digests:
            found.add(x)

    walk(answer)
    return {i: digests[i] for i in sorted(found)}


def _run(args: list[str]) -> dict[str, object]:
    res = run_kb("query", *args, "--json")
    out: dict[str, object] = {"args": args, "exit": res.code}
    if res.out.strip():
        out["answer"] = json.loads(res.out)
    else:
        out["stderr"] = res.err.strip()
    # goldens must not depend on where the checkout lives
    return dict(json.loads(json.dumps(out).replace(str(ROOT), "<root>")))


def golden_of(got: dict[str, Any], args: list[str]) -> dict[str, Any]:
    """What the golden file keeps: the whole answer on the fixture KB, the reviewer's view + digests on the shipped."""
    if not on_shipped(args) or "answer" not in got:
        return got
    return {"args": got["args"], "exit": got["exit"], "view": view(got["answer"]),
            "records": record_digests(got["answer"])}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    path = HERE / f"{name}.json"
    got = _run(CASES[name])
    if "answer" in got:
        jsonschema.validate(got["answer"], SCHEMA)
    mine = golden_of(got, CASES[name])
    if os.environ.get("KB_REGEN"):
        HERE.mkdir(exist_ok=True)
        path.write_text(json.dumps(mine, indent=1, sort_keys=True) + "\n")
    assert path.exists(), f"missing golden {path.name}: run KB_REGEN=1 pytest {__file__}"
    want = json.loads(path.read_text())
    if "records" in want:
        changed = sorted(i for i, d in want["records"].items() if _kb_records().get(i) != d)
        assert not changed, (f"{path.name}: records changed since the golden was written ({', '.join(changed[:8])}"
                             f"); regenerate it in the same change (KB_REGEN=1 pytest {__file__} -k {name}) and "
                             "read the diff")
    assert mine == want


def test_a_changed_record_is_caught() -> None:
    answer = {"kernels": [{"id": "flash-attention-3", "status": "ok", "reasons": []}]}
    digests = record_digests(answer)
    assert list(digests) == ["flash-attention-3"]
    assert view(answer)["kernels"] == ["flash-attention-3: ok"]
    edited = dict(_kb_records())
    edited["flash-attention-3"] = "0" * 16
    assert digests != {i: edited[i] for i in digests}  # what test_golden compares


def test_error_goldens_exit_2_with_a_fix() -> None:
    for name in ("bad-ctx-zero", "bad-ctx-negative", "bad-ctx-garbage", "bad-ctx-fraction", "bad-kv", "bad-lib",
                 "missing-inputs", "unknown-gpu", "unknown-model"):
        got = _run(CASES[name])
        assert got["exit"] == 2, name
        assert "Traceback" not in str(got.get("stderr"))
        assert "fix:" in str(got.get("stderr")) or "did you mean" in str(got.get("stderr")), name


def test_no_golden_without_a_case() -> None:
    assert {p.stem for p in HERE.glob("*.json")} <= set(CASES)


def test_a_verdict_and_its_summary_never_disagree() -> None:
    """'conditional' is never summarized as a plain 'yes (...)', nor 'yes' as 'yes with caveats' (issue 26)."""
    import re

    bad = []
    for path in sorted(HERE.glob("*.json")):
        data = json.loads(path.read_text())
        answer = data.get("answer") or data.get("view") or {}
        for a in [answer] if "verdict" in answer else answer.get("rows", []):
            summary, verdict = a.get("summary") or "", a.get("verdict")
            if verdict == "conditional" and re.search(r": yes \(", summary):
                bad.append((path.name, summary))
            if verdict == "yes" and "caveat" in summary:
                bad.append((path.name, summary))
    assert bad == []
