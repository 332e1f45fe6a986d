"""One decision per accelerator (kbtool/solve/decision.py): the cases that bind before the kernel layer."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool import query_cli
from kbtool.render.verdict import answer_summary
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve


@pytest.fixture(scope="module")
def img() -> Any:
    return query_cli.image()


@pytest.mark.parametrize(("engine", "line"), [
    ("vllm", "vllm serve meta-llama/Llama-3.1-70B-Instruct --cpu-offload-gb 70 --max-model-len 32k"),
    ("sglang", "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --cpu-offload-gb 70 "
               "--context-length 32768"),
])
def test_a_flag_that_moves_memory_kb_does_not_model_is_named_never_a_confident_no(img: Any, engine: str,
                                                                                  line: str) -> None:
    """70B in bf16 does not fit one H100; --cpu-offload-gb 70 may make it fit, which kb does not model (issue 44)."""
    plain = solve(img, build_query(gpu="h100", engine=engine, **{f"{engine}_args": line.replace(
        " --cpu-offload-gb 70", "")}))
    a = solve(img, build_query(gpu="h100", engine=engine, **{f"{engine}_args": line}))
    assert plain.verdict == "no"  # type: ignore[union-attr]
    assert a.verdict == "conditional" and a.decision.case == "UNMODELLED_MEMORY"  # type: ignore[union-attr]
    assert "--cpu-offload-gb (weights offloaded to host memory)" in answer_summary(a)  # type: ignore[arg-type]


LMCACHE = "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'"


@pytest.mark.parametrize("flag", [f"--kv-transfer-config {LMCACHE}", "--kv-offloading-size 20"])
def test_a_kv_connector_makes_a_fitting_answer_conditional(img: Any, flag: str) -> None:
    """A KV connector allocates buffers kb does not model (vllm#21348, LMCache on 4xH100: vLLM logged 8.11 GiB for
    the KV cache where kb's model of the line without the connector gives 13.31); "yes" becomes conditional, naming
    the flag."""
    line = "vllm serve Qwen/Qwen3-8B --max-model-len 32768"
    assert solve(img, build_query(gpu="h100", vllm_args=line)).verdict == "yes"
    a = solve(img, build_query(gpu="h100", vllm_args=f"{line} {flag}"))
    assert a.verdict == "conditional" and a.decision.case == "UNMODELLED_MEMORY"  # type: ignore[union-attr]
    assert flag.split()[0] in answer_summary(a)  # type: ignore[arg-type]


@pytest.mark.parametrize("typed", ["--speculative_model", "--speculative-model"])
def test_a_retired_draft_model_flag_makes_the_answer_conditional(img: Any, typed: str) -> None:
    """vLLM's --speculative-model (before --speculative-config took it over) loads a draft model no recorded
    release's parser knows; vllm#8731 pasted it with Qwen2.5-32B on 4 x A100-40GB and ran out of memory. kb lists it as
    not a flag of the release and, as for --speculative-config, says memory is not decided rather than "yes"."""
    line = ("python -m vllm.entrypoints.openai.api_server --model Qwen2.5-32B-Instruct -tp 4 --max-model-len 1000 "
            "--gpu_memory_utilization 0.9")
    assert solve(img, build_query(gpu="a100-40gb", vllm_args=line)).verdict == "yes"
    a = solve(img, build_query(gpu="a100-40gb", vllm_args=f"{line} {typed} Qwen2.5-7B-Instruct"))
    assert a.verdict == "conditional" and a.decision.case == "UNMODELLED_MEMORY"  # type: ignore[union-attr]
    assert f"{typed} (a draft model and its KV cache" in answer_summary(a)  # type: ignore[arg-type]
    # a flag that is not one of vLLM's, nor a retired one, stays listed and leaves the verdict alone
    b = solve(img, build_query(gpu="a100-40gb", vllm_args=f"{line} --speculative-modelx 3"))
    assert b.verdict == "yes"


def test_the_engines_start_up_check_binds_the_verdict(img: Any) -> None:
    """vLLM 0.33.0 refuses gemma-3-27b at 128k on an H100 (its count: maximum concurrency under 1); kb said "yes,
    KV fits" above that line before one decision made both."""
    a = solve(img, build_query(gpu="h100", model="gemma-3-27b", ctx="128k", engine="vllm", vllm="0.33.0"))
    assert a.memory.pool.starts is False and a.memory.pool.concurrency < 1  # type: ignore[union-attr]
    assert a.verdict == "no" and a.decision.case == "POOL_REFUSES"  # type: ignore[union-attr]
    assert "would stop at start-up" in answer_summary(a)  # type: ignore[arg-type]
    # vLLM 0.34.0 (the default since its priority records) resolves gpu_memory_utilization to 1.0: the same
    # configuration clears the start-up check there, and the answer says so
    b = solve(img, build_query(gpu="h100", model="gemma-3-27b", ctx="128k", engine="vllm"))
    assert b.assumed["vllm"].startswith("0.34.0 (the newest release kb records priority lists for)")
    assert b.memory.utilization == 1.0 and b.memory.pool.starts is True  # type: ignore[union-attr]
    assert b.verdict != "no"


GPTQ = "vllm serve probes/vllm_boot/models/qwen2.5-7b-instruct-gptq-int4/config.json --max-model-len 32768"


def test_a_verified_failure_at_first_use_of_the_engines_pick_is_a_no(img: Any) -> None:
    """An fp16 checkpoint (GPTQ) with an fp8 KV cache: vLLM 0.24.0 and 0.26.0 pick FLASH_ATTN, size the cache and
    fail at the first forward ('output must have dtype BF16'), as both releases' boots showed (claim
    vllm-fa3-fp8-kv-needs-bf16-model, effect fails). Where it is verified the verdict is no, with the workaround;
    in bf16, or with the KV in the model dtype, it serves; on a release no boot covers it stays conditional."""
    def ask(line: str, release: str = "0.26.0") -> Any:
        return solve(img, build_query(gpu="h100", vllm_args=line, lib=[f"vllm={release}"]))

    a = ask(GPTQ + " --kv-cache-dtype fp8")
    d = a.decision
    assert (a.verdict, d.case) == ("no", "ENGINE_FAILS")
    assert d.detail["fails"]["claim"] == "vllm-fa3-fp8-kv-needs-bf16-model"
    words = answer_summary(a)
    assert "then fails at first use" in words and "--dtype bfloat16" in words
    for fixed in (GPTQ + " --kv-cache-dtype fp8 --dtype bfloat16", GPTQ + " --kv-cache-dtype auto"):
        assert ask(fixed).decision.case == "ENGINE", fixed
    later = ask(GPTQ + " --kv-cache-dtype fp8", "0.33.0")  # no boot of 0.33.0: the claim is unverified there
    assert (later.verdict, later.decision.case, later.decision.caveats[:1]) == ("conditional", "ENGINE", ["engine"])


def test_a_quantized_checkpoint_known_by_name_only_is_conditional_on_its_dtype(img: Any, monkeypatch: Any) -> None:
    """The same failure where kb has only the checkpoint's name: an AWQ/GPTQ export's torch_dtype is often float16
    (every such config.json kb holds says so), and kb has not read this one's, so it neither says yes from the base
    model's bf16 nor no: conditional, with the failure in fp16 and its fix named. --dtype given decides it."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", "/nonexistent-kb-test-cache")

    def ask(name: str, **kw: Any) -> Any:
        return solve(img, build_query(gpu="h100", model=name, engine="vllm", lib=["vllm=0.26.0"], **kw))

    a = ask("Qwen/Qwen2.5-32B-Instruct-AWQ", kv="fp8")
    assert (a.verdict, a.decision.case) == ("conditional", "DTYPE_UNREAD")
    assert a.decision.detail["fails"]["claim"] == "vllm-fa3-fp8-kv-needs-bf16-model"
    words = answer_summary(a)
    assert "if it is float16" in words and "--dtype bfloat16" in words
    assert "torch_dtype is not read" in a.assumed["dtype"]
    assert ask("Qwen/Qwen2.5-32B-Instruct-AWQ", kv="fp8", dtype="bf16").decision.case == "ENGINE"
    assert ask("Qwen/Qwen2.5-32B-Instruct-AWQ", kv="fp8", dtype="fp16").decision.case == "ENGINE_FAILS"
    assert ask("Qwen/Qwen2.5-32B-Instruct-AWQ").decision.case == "ENGINE"  # KV in the model dtype: either serves
    fp8 = ask("Qwen/Qwen2.5-32B-Instruct-FP8", kv="fp8")  # not an AWQ/GPTQ export: the base dtype stands
    assert fp8.decision.case != "DTYPE_UNREAD"
