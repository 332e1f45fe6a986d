"""SGLang behind the engine interface (kbtool/solve/engines/sglang/engine.py): a pasted launch line and kb's own options
reach SGLang's resolution; its refusals become a "no" with its exact message; every backend is judged by asking
the resolution for it; the pool is sized with its resolved mem_fraction_static and page size; --engine
vllm,sglang sets both answers side by side."""

from __future__ import annotations

import json

import pytest

from kbtool.query_cli import image, main
from kbtool.render.verdict import answer_summary
from kbtool.solve.engines.sglang import facts as sglang_facts
from kbtool.solve.engines.sglang import resolve as sglang_resolve
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve


@pytest.fixture(scope="module")
def img():  # type: ignore[no-untyped-def]
    return image()


def _ask(img, **kw):  # type: ignore[no-untyped-def]
    return solve(img, build_query(**kw))


def _resolved(img, gpu: str, model: str, args: dict) -> dict:  # type: ignore[no-untyped-def,type-arg]
    acc = img.accelerator(gpu)
    cc = {"nvidia-h100-sxm": 9.0, "nvidia-b200": 10.0, "nvidia-a100-sxm4-80gb": 8.0}[gpu]
    return sglang_resolve.resolve(img, sglang_resolve.releases(img)[-1], sglang_facts.platform_facts(acc, cc, img.cuda),
                                  sglang_facts.model_facts_from_record(img.model(model)), args)


@pytest.mark.parametrize("gpu,model,line", [
    ("nvidia-h100-sxm", "llama-3.1-8b", "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B"),
    ("nvidia-b200", "llama-3.1-8b", "sglang serve --model-path llama-3.1-8b --kv-cache-dtype fp8_e4m3"),
    ("nvidia-b200", "deepseek-v3", "--model-path deepseek-ai/DeepSeek-V3 --tp 8"),
    ("nvidia-h100-sxm", "gpt-oss-120b", "--model-path openai/gpt-oss-120b --attention-backend triton"),
])
def test_the_answer_is_sglangs_own_resolution(img, gpu: str, model: str, line: str) -> None:  # type: ignore[no-untyped-def]
    a = _ask(img, gpu=gpu, sglang_args=line)
    from kbtool.solve.engines.sglang.args import parse

    fields = dict(parse(line).fields)
    fields.pop("model_path", None)
    want = _resolved(img, gpu, model, fields)
    assert a.query["engine"] == "sglang" and a.engine is not None
    assert (a.engine["prefill"], a.engine["decode"], a.engine["page_size"]) == \
        (want["prefill"], want["decode"], want["page_size"])
    assert a.memory is not None and a.memory.engine_report is not None
    assert a.memory.engine_report["page_size"] == want["page_size"]
    assert a.memory.engine_report["max_total_num_tokens"] % want["page_size"] == 0
    assert a.memory.utilization == want["mem_fraction_static"]


def test_a_refusal_is_a_no_with_sglangs_exact_error(img) -> None:  # type: ignore[no-untyped-def]
    a = _ask(img, gpu="h100", model="deepseek-v3", gpus=8, sglang_args="--attention-backend trtllm_mla")
    assert a.verdict == "no"
    assert a.engine["error"] == "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use " \
                                "a different backend."
    assert a.engine["error_type"] == "ValueError" and a.engine["where"].startswith("srt/arg_groups/overrides.py:")
    assert "refuses to start" in answer_summary(a)


def test_each_backend_is_judged_by_asking_sglang_for_it(img) -> None:  # type: ignore[no-untyped-def]
    a = _ask(img, gpu="h100", model="llama-3.1-8b", ctx="32k", engine="sglang")
    by = {b.id: b for b in a.backends}
    assert by["sglang-fa3"].status == "ok"
    assert any("CuteDSL MLA backend is only supported on Blackwell" in r.message
               for r in by["sglang-cutedsl-mla"].reasons)
    assert any(r.code == "PLATFORM" for r in by["sglang-aiter"].reasons)
    assert any(r.code == "NOT_REGISTERED" for r in by["sglang-cutlass-mla"].reasons)  # 0.5.17 only
    assert not a.depends_on  # SGLang's resolution leaves nothing unknown about its own backends


def test_kb_options_fill_what_the_line_leaves_out(img) -> None:  # type: ignore[no-untyped-def]
    a = _ask(img, gpu="b200", model="llama-3.1-8b", kv="fp8", gpus=2, engine="sglang")
    assert a.engine["kv_cache_dtype"] == "fp8_e4m3"
    assert a.memory is not None and a.memory.kv_bytes_per_token == 4 * 256 * 32  # 8 KV heads over 2 ranks, fp8


def test_release_pinning(img, capsys) -> None:  # type: ignore[no-untyped-def]
    old = _ask(img, gpu="h100", model="llama-3.1-8b", sglang="0.5.17")
    assert old.engine["sglang"] == "0.5.17" and old.query["release"] == "0.5.17"
    unrecorded = _ask(img, gpu="h100", model="llama-3.1-8b", sglang="0.4.0")  # tests/solve/test_sglang_unrecorded.py
    assert unrecorded.engine["state"] == "not_recorded" and unrecorded.verdict == "conditional"
    assert main(["--gpu", "h100", "--engine", "sglang", "--sglang", "latest"]) == 2
    err = capsys.readouterr().err
    assert "0.5.17, 0.5.18, 0.5.19, 0.5.20, 0.5.21, 0.5.22, 0.5.23" in err and "fix: e.g. --sglang 0.5.23" in err
    assert main(["--gpu", "h100", "--engine", "vllm", "--sglang", "0.5.23"]) == 2


def test_two_engines_side_by_side(capsys) -> None:  # type: ignore[no-untyped-def]
    rc = main(["--gpu", "b200", "--engine", "vllm,sglang", "--model", "llama-3.1-8b", "--ctx", "32k", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["engine"] for d in out["digest"]] == ["vllm", "sglang"]
    assert [a["query"]["engine"] for a in out["answers"]] == ["vllm", "sglang"]
    vllm, sgl = out["digest"]
    assert sgl["page_size"] == 64 and sgl["decode"] == "trtllm_mha"  # SGLang forces trtllm_mha's page of 64
    assert any(t.startswith("paged-KV block (page) size") for t in out["differences"]) == \
        (vllm["page_size"] != sgl["page_size"])
    assert any(t.startswith("KV pool tokens") for t in out["differences"])
    assert main(["--engine", "vllm,sglang", "--model", "llama-3.1-8b"]) == 2  # one accelerator


def test_a_pasted_line_gives_the_other_engine_its_model_and_context(capsys) -> None:  # type: ignore[no-untyped-def]
    rc = main(["--gpu", "h100", "--engine", "vllm,sglang", "--json", "--sglang-args",
               "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --context-length 16384 --tp 2"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    qs = [a["query"] for a in out["answers"]]
    assert all(q["model"] == "qwen3-8b" and q["ctx"] == 16384 and q["gpus"] == 2 for q in qs)


def test_to_fit_comes_from_sglangs_own_pool(img) -> None:  # type: ignore[no-untyped-def]
    """Issue 44: the SGLang answer no longer says "nothing kb can change fits" where more GPUs fit: each change is
    planned again by the same pool (pool.py _to_fit), with SGLang's mem_fraction_static for the changed line."""
    a = _ask(img, gpu="h100", model="qwen3-32b", ctx="32768", engine="sglang")
    m = a.memory
    assert m.fits is False
    changes = [o["change"] for o in m.to_fit]
    assert "--gpus 2" in changes and m.gpus_to_fit == 2
    assert all(o["max_sequences"] and o["max_sequences"] >= 1 for o in m.to_fit if not o["change"].startswith("--ctx"))


def test_context_beyond_the_model_names_sglangs_variable(img) -> None:  # type: ignore[no-untyped-def]
    """SGLang refuses a --context-length past the config unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1
    (0.5.23 sglang/srt/configs/model_config.py:1291-1316), not vLLM's variable."""
    text = answer_summary(_ask(img, gpu="h100", model="llama-3.1-8b", ctx="262144", engine="sglang"))
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in text and "VLLM" not in text


def test_mamba_state_pool_refusal_is_sglangs_text(img) -> None:  # type: ignore[no-untyped-def]
    """Qwen3-Next on two H100s: its bf16 weights leave nothing, and SGLang stops in _handle_max_mamba_cache
    (0.5.23 mem_cache/kv_cache_configurator.py:3392) before the KV budget check."""
    a = _ask(img, gpu="h100", model="qwen3-next-80b-a3b", gpus=2, ctx="32768", engine="sglang")
    assert a.verdict == "no"
    pool = a.memory.pool
    assert pool.starts is False and pool.error.startswith(
        "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
        "max_mamba_cache_size=")


def test_pipeline_stages_are_named_as_not_modelled() -> None:
    """SGLang's --pp-size splits layers, weights and KV over stages; kb sizes one stage holding them all, so the
    answer is conditional naming the flag (not SGLang's start-up refusal), the header counts tp x pp GPUs, and the
    no-fit words use SGLang's own share of the device (0.827 x 85.0 GB), not weights + reserve."""
    from kbtool import query_cli
    from kbtool.render.verdict import answer_summary
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    line = ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --tp 2 --pp-size 2 "
            "--context-length 65536")
    a = solve(query_cli.image(), build_query(gpu="h100", engine="sglang", sglang_args=line))
    text = answer_summary(a)
    assert a.verdict == "conditional" and text.startswith("nvidia-h100-sxm x4:"), text
    assert "--pp-size" in text and "usable (0.827 x 85.0 GB)" in text
    assert "exceed the 70.3 GB usable" in text, text
