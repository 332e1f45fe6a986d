"""gpt-oss's MXFP4 experts as vLLM holds them on a Hopper GPU (kbtool/solve/engines/vllm/budget.py
mxfp4_kept_scales): releases up to 0.24.0 swizzle the expert weights and scales into new tensors for the OAI Triton
MoE backend but delete only the old weights, so the checkpoint's scales stay on the layer beside their swizzled copy
(fused_moe/oracle/mxfp4.py:1123-1148 in 0.24.0 ee0da84ab, 721-745 in 0.19.1 b1388b1fb); 0.25.0 deletes them too
(oracle/mxfp4.py:1126-1156, dd10e03f9). A boot of 0.14.1 on one H100 logged "Model loading took 64.38 GiB"
(vllm-project/vllm#33155, tests/data/boot-logs/vllm.yaml), which the checkpoint's bytes alone (60.67 GiB) miss."""

from __future__ import annotations

import yaml

from kbtool.query_cli import image
from kbtool.solve.engines.vllm import budget
from kbtool.solve.engines.vllm import pool as vllm_pool
from tests.util import ROOT

GIB = 1 << 30
EVIDENCE = ROOT / "records" / "evidence"


def _weights(release: str, sm: str, model: str = "gpt-oss-120b") -> int:
    m = image().model(model)
    f = budget.fit(m, "bf16", 85 * 10**9, 4096, batched_tokens=1024, max_num_seqs=256, utilization=0.95,
                   release=release, sm=sm, acct=vllm_pool.accounting(release))
    return int(f.weights_bytes)


def test_releases_that_keep_the_scales_load_them_twice_on_hopper() -> None:
    m = image().model("gpt-oss-120b")
    experts = int(m.parameter_groups["experts"])
    for rel in ("0.19.1", "0.24.0"):
        assert _weights(rel, "sm90") - _weights("0.25.0", "sm90") == experts // 32, rel
    # 64.0 GiB against the 64.38 GiB vLLM 0.14.1 logged on one H100 (the rest: biases kb leaves out, scale padding)
    assert 63.5 * GIB < _weights("0.24.0", "sm90") < 64.38 * GIB


def test_releases_that_free_them_and_other_gpus_load_the_checkpoint_once() -> None:
    once = _weights("0.33.0", "sm90")
    assert once == _weights("0.25.0", "sm90") == _weights("0.24.0", "sm100") == _weights("0.24.0", "sm80")
    # a model that is not MXFP4 is untouched
    assert _weights("0.24.0", "sm90", "qwen3-8b") == _weights("0.33.0", "sm90", "qwen3-8b")


def test_the_answer_says_why() -> None:
    m = image().model("gpt-oss-120b")
    f = budget.fit(m, "bf16", 85 * 10**9, 4096, batched_tokens=1024, max_num_seqs=256, release="0.24.0", sm="sm90",
                   acct=vllm_pool.accounting("0.24.0"))
    assert "expert scales kept twice 3.58 GB" in f.formula and "vLLM 0.24.0 keeps" in f.formula


def _booted(name: str, model: str) -> dict[str, float]:
    """weights_gib vLLM logged for `model` in evidence `name`, by release (kb's own boots, load_format dummy)."""
    doc = yaml.safe_load((EVIDENCE / name).read_text(encoding="utf-8"))
    runs = [r for r in doc["cases"] if r["params"]["model"] == model and r.get("metrics")]
    return {str(r["metrics"]["release"]): float(r["metrics"]["weights_gib"]) for r in runs}


def test_kb_s_own_boots_differ_by_the_kept_scales() -> None:
    """gpt-oss-20b booted by kb on an H200 with 0.24.0 and on an H100 with 0.26.0 (both sm90): the two loads differ
    by the expert scales 0.24.0 keeps, and kb's weights leave the same remainder (biases kb does not count) on
    both."""
    h200 = _booted("2026-12-02-nvidia-h200-sxm-vllm-boot.yaml", "gpt-oss-20b")["0.24.0"]
    h100 = _booted("2026-12-06-nvidia-h100-sxm-vllm-boot.yaml", "gpt-oss-20b")["0.26.0"]
    kept = image().model("gpt-oss-20b").parameter_groups["experts"] // 32
    assert abs((h200 - h100) * GIB - kept) < 0.05 * kept
    rest_24 = h200 * GIB - _weights("0.24.0", "sm90", "gpt-oss-20b")
    rest_26 = h100 * GIB - _weights("0.26.0", "sm90", "gpt-oss-20b")
    assert 0 < rest_24 < 0.3 * GIB and 0 < rest_26 < 0.3 * GIB and abs(rest_24 - rest_26) < 0.05 * GIB
