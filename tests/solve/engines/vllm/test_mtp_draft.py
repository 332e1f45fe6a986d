"""vLLM's MTP speculative draft (`--speculative-config '{"method": "mtp", ...}'`), sized as each release builds it
(kbtool/solve/engines/vllm/spec.py, the `speculative:` line of records/engine-releases/vllm-X.yaml). Lines are the
wheels' (vllm 0.24.0 = git ee0da84ab):

- the draft's attention layers join the KV cache groups: a Qwen3.5/3.6-27B line logs "Add 3 padding layers"
  (noonghunna/club-3090#642: 48 GDN layers beside 16 + 1 full-attention layers, groups of 17;
  v1/core/kv_cache_utils.py:1195-1212 in 0.24.0);
- each Mamba/GDN group holds num_speculative_tokens more state pages per request (v1/kv_cache_interface.py:652-657,
  model_executor/layers/mamba/abstract.py:55-59 in 0.24.0);
- the CUDA-graph capture ceiling is max_num_seqs x (1 + num_speculative_tokens) x 2 (config/vllm.py:1689-1692);
- the draft's weights are its MTP layers (lm_head and embedding shared: v1/spec_decode/llm_base_proposer.py:1380).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kbtool import query_cli
from kbtool.render.verdict import answer_summary
from kbtool.solve.engines.vllm import pool as vllm_pool
from kbtool.solve.engines.vllm import records, spec
from kbtool.solve.engines.vllm.planning import Group, Point, group_blocks, planning
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from tests.util import DATA, ROOT

LINE_642 = ("serve qwen3.5-27b --trust-remote-code --dtype float16 --max-model-len 262144 --quantization auto_round "
            "--tensor-parallel-size 2 --disable-custom-all-reduce --kv-cache-dtype fp8_e5m2 --enable-prefix-caching "
            "--max-num-batched-tokens 8192 --max-num-seqs 2 --enable-chunked-prefill")
MTP3 = """--speculative-config '{"method":"mtp","num_speculative_tokens":3}'"""


@pytest.fixture(scope="module")
def img() -> Any:
    return query_cli.image()


def ask(img: Any, extra: str, release: str = "0.24.0") -> Any:
    return solve(img, build_query(gpu="rtx-3090", vllm_args=f"{LINE_642} {extra}", vllm=release, weights="int4"))


def test_the_draft_layer_joins_the_groups_as_the_log_shows(img: Any) -> None:
    """club-3090#642's log: "Add 3 padding layers" (48 GDN layers padded to groups of 17, since the MTP layer makes
    the full-attention layers 17); without the draft vLLM groups them by 16 and pads nothing."""
    model = img.model("qwen3.5-27b")
    assert model.mtp_layers == 1
    plain = vllm_pool.groups(model, "fp8_e4m3", 16, tp=2)
    drafted = vllm_pool.groups(model, "fp8_e4m3", 16, tp=2, draft_layers=1)
    assert plain is not None and drafted is not None
    assert plain[1] == [] and [g.layers for g in plain[0]] == [16, 16, 16, 16]
    assert drafted[1] == ["Add 3 padding layers, may waste at most 6.25% KV cache memory"]
    assert sorted(g.layers for g in drafted[0]) == [16, 16, 16, 17]


def test_each_mamba_group_holds_a_page_per_speculative_token() -> None:
    """MambaSpec.max_memory_usage_bytes: (1 + num_speculative_blocks) pages, (2 + ...) in mode align (0.24.0
    v1/kv_cache_interface.py:652-657)."""
    g = Group("mamba", 17, 1 << 20)
    plan = planning("0.24.0")
    assert group_blocks(g, 16, 262144, plan, Point(262144, 8192, mamba_mode="align", draft_blocks=3)) == 5
    assert group_blocks(g, 16, 262144, plan, Point(262144, 8192, mamba_mode="none", draft_blocks=3)) == 4
    assert group_blocks(g, 16, 262144, plan, Point(262144, 8192, mamba_mode="none")) == 1


def test_the_logged_pool_is_matched_with_the_draft_and_missed_without() -> None:
    """From the KV memory vLLM logged (11.05 GiB), its 623,873 tokens: kb's KV manager within 1% with the draft, and
    more than 10% over without it (the replay the boot-log table's kvm column makes)."""
    e = next(x for x in yaml.safe_load((DATA / "boot-logs" / "vllm.yaml").read_text())
             if x["url"].endswith("club-3090/issues/642"))
    from tests.solve.test_boot_logs import kv_manager

    assert abs(kv_manager(e)) < 0.01  # type: ignore[arg-type]
    plain = dict(e, args=e["args"].split(" --speculative-config")[0])
    assert kv_manager(plain) > 0.10  # type: ignore[operator]


def test_the_answer_sizes_the_draft(img: Any) -> None:
    """The MTP line is answered (not conditional), the draft's weights add its layer's parameters, and the answer
    names the draft on its assumed line."""
    a, b = ask(img, ""), ask(img, MTP3)
    assert b.verdict in ("yes", "no") and b.decision.case != "UNMODELLED_MEMORY"
    model = img.model("qwen3.5-27b")
    added = b.memory.weights_bytes - a.memory.weights_bytes
    assert added == pytest.approx(model.mtp_parameters * 0.5 / 2, rel=0.05)  # int4 over tp 2
    assert str(b.assumed["speculative decoding"]).startswith("MTP draft (mtp, 3 speculative tokens, vLLM 0.24.0)")
    assert b.memory.pool.concurrency < a.memory.pool.concurrency


@pytest.mark.parametrize("method", ["eagle", "draft_model", "ngram"])
def test_other_drafts_stay_conditional(img: Any, method: str) -> None:
    a = ask(img, f"""--speculative-config '{{"method":"{method}","num_speculative_tokens":3}}'""")
    assert a.verdict == "conditional" and a.decision.case == "UNMODELLED_MEMORY"
    assert f"method {method}; kb models only the MTP draft" in answer_summary(a)


def test_a_model_specific_mtp_name_is_taken_as_mtp(img: Any) -> None:
    """qwen3_5_mtp is one of MTPModelTypes, which 0.24.0 takes as mtp with a deprecation warning
    (config/speculative.py:34-54, 589-593)."""
    a = ask(img, """--speculative-config '{"method":"qwen3_5_mtp","num_speculative_tokens":2}'""")
    assert a.decision.case != "UNMODELLED_MEMORY"


def test_a_release_without_the_line_and_an_unlisted_model_stay_conditional(img: Any) -> None:
    a = ask(img, MTP3, release="0.20.0")  # no wheel of 0.20.0 was read: no speculative line
    assert a.verdict == "conditional" and "speculative line is not recorded" in answer_summary(a)
    b = solve(img, build_query(gpu="h200", vllm_args=f"serve deepseek-v3 -tp 8 --max-model-len 8192 {MTP3}",
                               vllm="0.24.0"))
    assert b.verdict == "conditional" and "an MTP draft of DeepseekV3ForCausalLM" in answer_summary(b)


def test_the_capture_ceiling_counts_the_decode_query_length() -> None:
    """0.24.0 config/vllm.py:1689-1692: min(max_num_seqs x (1 + num_speculative_tokens) x 2, 512)."""
    acct = vllm_pool.accounting("0.24.0")
    assert vllm_pool.capture_of(acct, None, 2, 8192)[0] == 4
    assert vllm_pool.capture_of(acct, None, 2, 8192, decode_len=4)[0] == 16


def test_every_read_release_cites_its_lines() -> None:
    """Every recorded release whose wheel was read carries the line, each value citing that release's files."""
    rows = records.recorded()
    have = sorted(r for r, row in rows.items() if row.get("speculative"))
    assert "0.24.0" in have and "0.34.0" in have and len(have) >= 16
    for rel in have:
        line = rows[rel]["speculative"]
        assert "mtp" in line["mtp_methods"][0] and "qwen3_5_mtp" in line["mtp_methods"][0]
        assert all(v[1] for v in line.values()), rel  # a source locator each
    assert (ROOT / "records" / "engine-releases" / "vllm-0.20.0.yaml").exists() and "0.20.0" not in have
    assert spec.read("not json") == {} and spec.read(None) is None
