"""Hypothesis fuzz targets (issue 30): the config importer and both serve-line parsers never raise anything but a
UsageError (exit 2), and what they accept is in range."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbtool.errors import UsageError
from kbtool.solve.engines.sglang import args as sglang_args
from kbtool.solve.engines.vllm import args as vllm_args
from kbtool.store.hfconfig_file import read_config
from tests.util import DATA

BASE = json.loads((DATA / "hf-configs" / "llama-3.1-8b" / "config.json").read_text())
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                   st.text(max_size=8), st.lists(st.integers(0, 4), max_size=3),
                   st.dictionaries(st.sampled_from(["factor", "rope_type", "quant_method"]),
                                   st.one_of(st.floats(), st.text(max_size=5)), max_size=2))
KEYS = st.sampled_from(["num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size", "num_hidden_layers",
                        "vocab_size", "rope_scaling", "quantization_config", "max_position_embeddings",
                        "intermediate_size", "torch_dtype", "sliding_window", "layer_types", "text_config"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(KEYS, VALUES, max_size=3))
def test_config_importer(tmp_path: Path, changes: dict[str, Any]) -> None:
    data = {**BASE, **changes}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    try:
        rec = read_config(str(path), "fuzz")
    except UsageError:
        return
    assert rec["num_heads"] >= 1 and rec["head_dim"] >= 1
    for g in rec["layers"]:
        if g.get("kv_heads"):
            assert rec["num_heads"] % g["kv_heads"] == 0
    factor = (rec.get("rope_scaling") or {}).get("factor")
    assert factor is None or math.isfinite(factor)


WORDS = st.sampled_from(["-tp", "--tensor-parallel-size", "--kv-cache-dtype", "--max-model-len", "--block-size",
                         "--gpu-memory-utilization", "-pp", "--tp-size", "--tp", "--page-size", "--context-length",
                         "--mem-fraction-static", "0", "-1", "1e400", "nan", "32k", "8", "'", "\x1b]0;", "x=y",
                         "--kv-cache-memory-bytes", "infk", "1e400k", "-5", "99999999999T", "20G",
                         "--model", "serve", "m"])


@settings(max_examples=200, deadline=None)
@given(words=st.lists(WORDS, max_size=8))
def test_serve_line_parsers(words: list[str]) -> None:
    line = " ".join(words)
    try:
        v = vllm_args.parse("serve m " + line)
        for n in (v.tp, v.pp, v.dp, v.block_size):
            assert n is None or n >= 1
        assert v.max_model_len is None or v.max_model_len >= 1 or v.max_model_len == -1  # -1: vLLM's auto
        assert v.kv_cache_memory is None or 0 <= v.kv_cache_memory <= 2**53
    except UsageError:
        pass
    try:
        s = sglang_args.parse("python -m sglang.launch_server " + line)
        for k in ("tp_size", "pp_size", "page_size", "context_length"):
            n = s.fields.get(k)
            assert n is None or (isinstance(n, int) and 1 <= n <= 2**53)
    except UsageError:
        pass
