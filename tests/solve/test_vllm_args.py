"""`--vllm-args "serve MODEL ..."` and `--vllm VERSION`: parsing and the pre-flight answer on the shipped KB."""

from __future__ import annotations

import json

import pytest

from kbtool.errors import UsageError
from kbtool.solve.engines.vllm.args import parse
from tests.util import run_kb


def test_parse_reads_the_flags_that_matter() -> None:
    a = parse("vllm serve deepseek-ai/DeepSeek-V3 --kv-cache-dtype fp8 --attention-backend FLASHINFER "
              "--max-model-len 128k -tp 2 --gpu-memory-utilization 0.85 --block-size=32 "
              "--max-num-batched-tokens 8192 --enable-prefix-caching --seed 1")
    assert (a.model, a.kv_cache_dtype, a.attention_backend, a.max_model_len, a.tp, a.gpu_memory_utilization,
            a.block_size, a.max_num_batched_tokens) == ("deepseek-ai/DeepSeek-V3", "fp8", "FLASHINFER", 128_000, 2,
                                                        0.85, 32, 8192)
    assert a.ignored == ["--seed"] and a.enable_prefix_caching is True  # read: a hybrid's state pages depend on it


def test_a_hugging_face_id_in_a_serve_line_names_the_record_of_its_model_part() -> None:
    r = run_kb("query", "--gpu", "h200", "--vllm-args", "serve deepseek-ai/DeepSeek-V3 --max-model-len 32k", "--json",
               env={"KB_NO_CACHE": "1", "KB_OFFLINE": "1"})
    assert r.code == 0, r.err
    assert json.loads(r.out)["query"]["model"] == "deepseek-v3"


@pytest.mark.parametrize(("text", "message"), [
    ("serve m --max-model-len lots", "--vllm-args: --max-model-len takes a number; got 'lots'"),
    ("serve m --block-size", "--vllm-args: --block-size needs a value"),
    # issue 48: vLLM takes -1 (auto) and no other negative length; infinities and overflows were OverflowError (exit 3)
    ("serve m --max-model-len -5",
     "--vllm-args: --max-model-len -5 must be at least 1, or -1 (auto) (vLLM refuses it)"),
    ("serve m --max-model-len 0", "--vllm-args: --max-model-len 0 must be at least 1, or -1 (auto) (vLLM refuses it)"),
    ("serve m --max-model-len infk", "--vllm-args: --max-model-len takes a number; got 'infk'"),
    ("serve m --max-model-len 1e400k", "--vllm-args: --max-model-len takes a number; got '1e400k'"),
    ("serve m --max-model-len nank", "--vllm-args: --max-model-len takes a number; got 'nank'"),
    ("serve m --max-model-len 99999999999T", "--vllm-args: --max-model-len takes a number; got '99999999999T'"),
    ("serve m --kv-cache-memory-bytes -5", "--vllm-args: --kv-cache-memory-bytes -5 must not be negative"),
    ("serve m --kv-cache-memory-bytes infk", "--vllm-args: --kv-cache-memory-bytes takes a number; got 'infk'"),
    ("serve m --max-num-batched-tokens 1e400k",
     "--vllm-args: --max-num-batched-tokens takes a number; got '1e400k'"),
])
def test_parse_errors_name_the_flag(text: str, message: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse(text)
    assert str(exc.value.args[0]) == message


def answer(*args: str) -> dict:  # type: ignore[type-arg]
    r = run_kb("query", "--json", *args)
    assert r.code == 0, r.err
    return json.loads(r.out)  # type: ignore[no-any-return]


def test_preflight_names_the_backend_and_the_concurrency() -> None:
    a = answer("--gpu", "h200", "--vllm-args", "serve deepseek-ai/DeepSeek-V3 --kv-cache-dtype fp8 "
               "--max-model-len 131072 -tp 8")
    e = a["engine"]
    assert a["verdict"] == "yes" and e["vllm"] == "0.34.0" and e["selected"] == "vllm-flashmla"
    assert a["query"]["gpus"] == 8 and a["query"]["ctx"] == 131072 and a["query"]["kv"] == "fp8_e4m3"
    assert e["mla"]["prefill"][0] == "FLASH_ATTN (varlen)" and e["mla"]["prefill_shape"] == "qk 192 / v 128"
    assert e["preflight"].startswith("Using FLASHMLA attention backend; KV cache ")
    assert "maximum concurrency for 131,072 tokens per request" in e["preflight"]


def test_an_explicit_backend_vllm_refuses_gives_vllms_error() -> None:
    a = answer("--gpu", "h100", "--vllm-args", "serve llama-3.1-8b --kv-cache-dtype fp8 "
               "--attention-backend FLEX_ATTENTION --max-model-len 8192")
    assert a["verdict"] == "no" and a["engine"]["selected"] is None
    assert a["engine"]["preflight"].startswith("ValueError: Selected backend AttentionBackendEnum.FLEX_ATTENTION "
                                               "is not valid for this configuration. Reason: [")


def test_kv_that_does_not_fit_gives_vllms_kv_error() -> None:
    a = answer("--gpu", "h100", "--vllm-args", "serve llama-3.1-70b --max-model-len 131072 -tp 2")
    assert a["verdict"] == "no"
    assert a["engine"]["preflight"].startswith("ValueError: To serve at least one request with the model's max "
                                               "seq len (131072), (")


def test_older_release_and_unknown_release() -> None:
    a = answer("--gpu", "h100", "--head-dim", "256", "--kv", "bf16", "--vllm", "0.19.1")
    assert a["engine"]["vllm"] == "0.19.1" and a["query"]["engine"] == "vllm"
    old = answer("--gpu", "h100", "--head-dim", "128", "--vllm", "0.1.0")  # not recorded: named as such (issue 28)
    assert old["verdict"] == "conditional" and old["engine"]["selected"] is None
    assert old["engine"]["between"].startswith("before the oldest recorded release 0.19.1 (selects FLASH_ATTN)")
    r = run_kb("query", "--gpu", "h100", "--head-dim", "128", "--vllm", "latest")
    assert r.code == 2 and "--vllm latest: not a release number" in r.err


def test_parse_reads_the_flags_that_move_memory() -> None:
    a = parse("vllm serve m --quantization fp8 -pp 4 --data-parallel-size 2 --max-num-seqs 256 --enforce-eager "
              "--seed 4")
    assert (a.quantization, a.pp, a.dp, a.max_num_seqs, a.enforce_eager) == ("fp8", 4, 2, 256, True)
    assert a.ignored == ["--seed"]


def test_parse_reads_the_prefix_caching_switches() -> None:
    """--enable-prefix-caching / --no-enable-prefix-caching (a hybrid's state pages, planning.state_mode); absent: None,
    the release's default."""
    assert parse("vllm serve m --enable-prefix-caching").enable_prefix_caching is True
    assert parse("vllm serve m --no-enable-prefix-caching", "0.24.0").enable_prefix_caching is False
    assert parse("vllm serve m --max-model-len 4096").enable_prefix_caching is None
    assert "--enable-prefix-caching" not in parse("vllm serve m --enable-prefix-caching").ignored


def test_pipeline_parallel_and_quantization_change_the_answer() -> None:
    base = ["query", "--gpu", "h100", "--json", "--vllm-args"]
    plain = json.loads(run_kb(*base, "serve llama-3.1-70b --max-model-len 32768").out)["memory"]
    staged = json.loads(run_kb(*base, "serve llama-3.1-70b --max-model-len 32768 -pp 4 --quantization fp8 "
                                      "--seed 4").out)
    m = staged["memory"]
    # fp8 halves the quantized groups (embeddings and lm_head stay bf16); each of 4 stages holds a quarter
    assert m["weights_dtype"] == "fp8" and 0.5 < m["weights_bytes"] * 4 / plain["weights_bytes"] < 0.55
    assert m["kv_bytes_per_token"] * 4 == plain["kv_bytes_per_token"]
    assert plain["fits"] is False and m["fits"] is True
    assert staged["query"]["ignored"] == ["--seed"] and staged["query"]["settings"]["pp"] == 4
    text = run_kb(*base[:-2], "--vllm-args", "serve llama-3.1-70b --max-model-len 32768 --seed 4").out
    assert "serve-line flags not considered: --seed" in text


def test_a_gpu_without_bf16_is_asked_in_fp16_by_default() -> None:
    t4 = json.loads(run_kb("query", "--gpu", "t4", "--model", "llama-3.1-8b", "--ctx", "8k", "--engine", "vllm",
                           "--json").out)
    assert str(t4["assumed"]["dtype"]).startswith("fp16") and t4["assumed"]["kv"].startswith("fp16")
    h100 = json.loads(run_kb("query", "--gpu", "h100", "--model", "llama-3.1-8b", "--ctx", "8k", "--json").out)
    assert h100["assumed"]["dtype"] == "bf16"


@pytest.mark.parametrize(("text", "tokens"), [("32k", 32_000), ("32K", 32_768), ("128k", 128_000),
                                             ("131072", 131_072), ("1.5k", 1_500), ("auto", -1), ("-1", -1)])
def test_numbers_are_read_as_vllm_reads_them(text: str, tokens: int) -> None:
    assert parse(f"serve m --max-model-len {text}").max_model_len == tokens


def test_binary_suffixes_take_no_decimals_and_plain_ints_take_no_suffix() -> None:
    with pytest.raises(UsageError):
        parse("serve m --max-model-len 1.5K")
    with pytest.raises(UsageError):
        parse("serve m -tp 2k")


def test_max_model_len_auto_fits_the_context_to_memory() -> None:
    full = answer("--gpu", "rtx4090", "--vllm-args", "serve llama-3.1-8b")
    auto = answer("--gpu", "rtx4090", "--vllm-args", "serve llama-3.1-8b --max-model-len auto")
    assert full["memory"]["fits"] is False  # the premise: the model's 131,072 tokens do not fit a 4090
    assert auto["memory"]["fits"] is True
    assert auto["memory"]["max_ctx"] == full["memory"]["max_ctx"] < 131_072
    assert "--max-model-len auto" in auto["assumed"]["ctx"]


@pytest.mark.parametrize("line", ["serve m --max-model-len -1", "serve m --max-model-len auto"])
def test_minus_one_is_vllms_auto(line: str) -> None:
    assert parse(line).max_model_len == -1


@pytest.mark.parametrize("flag", ["--max-model-len -5", "--max-model-len infk", "--kv-cache-memory-bytes -5",
                                  "--kv-cache-memory-bytes 1e400k"])
def test_bad_numbers_through_the_cli_exit_2_naming_the_flag(flag: str) -> None:
    r = run_kb("query", "--gpu", "h100", "--model", "llama-3.1-8b", "--engine", "vllm", "--vllm-args",
               f"serve m {flag}")
    assert r.code == 2, r
    assert r.err.startswith(f"error: --vllm-args: {flag.split()[0]} ") and "Traceback" not in r.err
