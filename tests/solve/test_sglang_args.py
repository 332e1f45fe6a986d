"""kbtool/solve/engines/sglang/args.py: SGLang launch commands as ServerArgs fields."""

from __future__ import annotations

import pytest

from kbtool.errors import UsageError
from kbtool.solve.engines.sglang.args import parse, parse_argv


def test_launch_server_with_aliases() -> None:
    a = parse("python -m sglang.launch_server --model deepseek-ai/DeepSeek-V3 --tp 8 --dp-size 2 "
              "--attention-backend=trtllm_mla --kv-cache-dtype fp8_e4m3 --page-size 32 --context-length 32K "
              "--mem-fraction-static 0.85 --disable-radix-cache --enable-metrics --log-level warning")
    assert a.model == "deepseek-ai/DeepSeek-V3"
    assert a.fields == {"model_path": "deepseek-ai/DeepSeek-V3", "tp_size": 8, "dp_size": 2,
                        "attention_backend": "trtllm_mla", "kv_cache_dtype": "fp8_e4m3", "page_size": 32,
                        "context_length": 32768, "mem_fraction_static": 0.85, "disable_radix_cache": True}
    assert a.unknown == ["--enable-metrics", "--log-level"]


def test_sglang_serve_and_defaults() -> None:
    a = parse("sglang serve --model-path m --tensor-parallel-size 4 --context-length 32k")
    s = a.server_args()
    assert (s["tp_size"], s["context_length"], s["kv_cache_dtype"], s["pp_size"]) == (4, 32000, "auto", 1)
    assert "page_size" not in s and "attention_backend" not in s  # resolved by SGLang, not defaulted


def test_argv_form() -> None:
    a = parse_argv(["--prefill-attention-backend", "fa3", "--decode-attention-backend", "flashinfer",
                    "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "4"])
    assert a.fields == {"prefill_attention_backend": "fa3", "decode_attention_backend": "flashinfer",
                        "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4}


@pytest.mark.parametrize(("cmd", "msg"), [
    ("--tp-size two", "--sglang-args: --tp-size takes a number; got 'two'"),
    ("--kv-cache-dtype fp8", "--sglang-args: --kv-cache-dtype: invalid choice 'fp8' (SGLang 0.5.23's parser "
     "refuses it); no recorded release has it (0.5.17, 0.5.23); a newer release may have it"),
    ("--attention-backend flash", "--sglang-args: --attention-backend: invalid choice 'flash' (SGLang 0.5.23's "
     "parser refuses it); no recorded release has it (0.5.17, 0.5.23); a newer release may have it"),
    ("--tp 5000", "--sglang-args: --tp 5000 is more GPUs than kb models (at most 4096)"),
    ("--page-size", "--sglang-args: --page-size needs a value"),
    ("--context-length infk", "--sglang-args: --context-length takes a number; got 'infk'"),  # issue 48
    ("--context-length 1e400k", "--sglang-args: --context-length takes a number; got '1e400k'"),
    ("--context-length -5", "--sglang-args: --context-length -5 must be at least 1 (SGLang refuses it)"),
    ("--page-size 99999999999999999999999", "--sglang-args: --page-size takes a number; got '99999999999999999999999'"),
])
def test_bad_values(cmd: str, msg: str) -> None:
    with pytest.raises(UsageError) as e:
        parse(cmd)
    assert str(e.value).splitlines()[0] == msg


def test_token_counts_ending_in_size_are_not_gpu_counts() -> None:
    """--chunked-prefill-size is tokens per prefill chunk (8092 in a real serve line), -1 disables it."""
    a = parse("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2 --chunked-prefill-size 8092")
    assert (a.fields["tp_size"], a.fields["chunked_prefill_size"]) == (2, 8092)
    assert parse("--chunked-prefill-size -1").fields["chunked_prefill_size"] == -1


def test_a_newer_attention_backend_names_the_recorded_release_and_the_choices() -> None:
    with pytest.raises(UsageError) as e:
        parse("--attention-backend flashattn_v5")
    assert e.value.fix is not None and e.value.fix.startswith("choose from triton, torch_native, ")
    assert e.value.fix.endswith("; for a newer release's value, kb needs that release's flag table "
                                "(probes/_serve_flags.py)")
