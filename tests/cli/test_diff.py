"""`kb diff` reads its argv with the query's one option reader (query_cli.read): pairs, values, flags, refusals."""

from __future__ import annotations

import pytest

from kbtool.cli.diff import parse
from kbtool.errors import UsageError


def test_reads_a_release_pair_and_the_question() -> None:
    got = parse(["--vllm", "0.33.0", "0.34.0", "--gpu=h100", "--model", "qwen3-32b", "--json"])
    assert got == {"engine": "vllm", "a": "0.33.0", "b": "0.34.0", "gpu": "h100", "model": "qwen3-32b",
                   "json": True}


def test_help_is_none() -> None:
    assert parse(["--sglang", "0.5.17", "0.5.23", "-h"]) is None


@pytest.mark.parametrize(("argv", "message"), [
    (["--vllm", "0.33.0"], "--vllm needs two values"),
    (["--vllm", "0.33.0", "--gpu", "h100"], "--vllm needs two values"),
    (["--vllm", "0.33.0", "0.34.0", "--sglang", "0.5.17", "0.5.23"], "compares the releases of one engine"),
    (["--gpu", "h100"], "which engine's releases?"),
    (["--vllm", "0.33.0", "0.34.0", "--model", "m"], "--model answers on one accelerator"),
    (["--vllm", "0.33.0", "0.34.0", "--gpu"], "--gpu needs a value"),
    (["--vllm", "0.33.0", "0.34.0", "--json=1"], "--json takes no value"),
    (["--vllm", "0.33.0", "0.34.0", "stray"], "unexpected argument 'stray'"),
])
def test_refusals_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match="kb diff: .*" + message.replace("?", r"\?")):
        parse(argv)
