"""Multimodal prefix-LM models under vLLM (kbtool/solve/engines/vllm/mmprefix.py, issue 44): vLLM selects their
attention backend with use_mm_prefix=True (vllm/model_executor/layers/attention/attention.py:344 in 0.33.0, from
ModelConfig.is_mm_prefix_lm: vllm/transformers_utils/model_arch_config_convertor.py:344-366), and kb answers it
from the release's recorded selector grid at that point, or says the choice depends on it where the grid does not
ask it."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool import query_cli
from kbtool.probe.judges import vllm_selector as vs_judge
from kbtool.render.verdict import answer_summary
from kbtool.solve.engines.vllm import grid, mmprefix
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from tests.util import ROOT

DATA = ROOT / "tests" / "data" / "vllm"
# 0.24.0's cc 9.0 grid as first recorded (probe version 3, no mm_prefix column), kept under its digest when 0.24.0
# was recorded again with the axis
BEFORE_THE_AXIS = (DATA / "0.24.0" / "superseded"
                   / "05682a663d68903c782e01d8ab0c8ed006408e63839298d97f1116ace494d0c0-cc9.0.json.gz")


@pytest.fixture(scope="module")
def img() -> Any:
    return query_cli.image()


def ask(img: Any, **kw: Any) -> Any:
    return solve(img, build_query(engine="vllm", **kw))


def recorded_point(release: str, cc: str, mm: bool, sliding: bool | None = True) -> dict[str, Any]:
    """The recorded grid point of a Gemma 3 layer (head 128, bf16, KV auto, vLLM's block, no sinks, TRT-LLM
    kernels available) at use_mm_prefix `mm`, with a sliding window (`sliding`; None: a grid without the axis)."""
    doc = vs_judge.load(DATA / release / f"cc{cc}.json.gz")
    found = [p for p in vs_judge.rows(doc, mm_prefix=mm) if p["layout"] == "dense" and p["head_size"] == 128
             and p["dtype"] == "bfloat16" and p["kv"] == "auto" and p["block"] is None and not p["sink"]
             and p["trtllm"] and p["sliding"] is sliding]
    assert len(found) == 1, found
    return found[0]


def backend(a: Any) -> str | None:
    names = {b["id"]: b["name"] for b in a.engine["backends"]}
    return names.get(a.engine["selected"], a.engine["selected"])


@pytest.mark.parametrize("release", ["0.33.0", "0.34.0"])
def test_gemma3_on_h100_runs_triton_attn(img: Any, release: str) -> None:
    """On Hopper, FLASH_ATTN refuses the prefix mask ("mm_prefix (PrefixLM bidirectional attention) requires
    FlashAttention v4, which does not resolve for this head_size"), FLASHINFER too: vLLM takes TRITON_ATTN, where
    kb answered FLASH_ATTN (the text model's choice)."""
    on, off = recorded_point(release, "9.0", True), recorded_point(release, "9.0", False)
    assert on["mm_prefix"] is True and (on["selected"], off["selected"]) == ("TRITON_ATTN", "FLASH_ATTN")
    assert any("mm_prefix" in r for r in on["reasons"]["FLASH_ATTN"])
    a = ask(img, gpu="h100", model="gemma-3-27b", vllm=release, ctx="8k")
    assert backend(a) == "TRITON_ATTN" == on["selected"]
    assert "own selector grid" in a.engine["source"] and "use_mm_prefix True" in a.engine["source"]
    assert a.assumed["use_mm_prefix"].startswith("True (Gemma3ForConditionalGeneration: model_type gemma3")
    assert "Using TRITON_ATTN attention backend" in a.engine["preflight"]


def test_gemma3_on_b200_runs_flash_attn(img: Any) -> None:
    """On Blackwell (cc 10.0), FlashAttention 4 runs the prefix mask: FLASH_ATTN, where the text model takes
    FLASHINFER."""
    on, off = recorded_point("0.33.0", "10.0", True), recorded_point("0.33.0", "10.0", False)
    assert (on["selected"], off["selected"]) == ("FLASH_ATTN", "FLASHINFER")
    a = ask(img, gpu="b200", model="gemma-3-27b", vllm="0.33.0", ctx="8k")
    assert backend(a) == "FLASH_ATTN"


@pytest.mark.parametrize("flag", ["--limit-mm-per-prompt '{\"image\": 0}'", "--language-model-only"])
def test_a_text_only_serve_turns_it_off(img: Any, flag: str) -> None:
    """supports_multimodal False (every modality limited to 0, or --language-model-only) turns mm_prefix off from
    0.28.0 (model_arch_config_convertor.py:352-353 in 0.33.0): the text model's choice again."""
    a = solve(img, build_query(gpu="h100", engine="vllm", vllm="0.33.0",
                               vllm_args=f"serve google/gemma-3-27b-it --max-model-len 8192 {flag}"))
    assert backend(a) == recorded_point("0.33.0", "9.0", False)["selected"] == "FLASH_ATTN"
    assert a.assumed["use_mm_prefix"].startswith("False (--")
    kept = solve(img, build_query(gpu="h100", engine="vllm", vllm="0.33.0", vllm_args=(
        "serve google/gemma-3-27b-it --max-model-len 8192 --limit-mm-per-prompt '{\"image\": 0}' "
        "--enable-mm-embeds")))
    assert backend(kept) == "TRITON_ATTN"  # pre-computed embeddings still need the multimodal path


def test_text_only_serve_before_0_28_keeps_it() -> None:
    """0.26.0's is_mm_prefix_lm takes no supports_multimodal (model_arch_config_convertor.py:303-318)."""
    model = type("M", (), {"architecture": "Gemma3ForConditionalGeneration"})()
    on, why = mmprefix.decide(model, "0.26.0", {"language_model_only": True})
    assert on is True and "does not turn it off before 0.28.0" in why
    assert mmprefix.decide(model, "0.28.0", {"language_model_only": True})[0] is False
    assert mmprefix.decide(model, "0.33.0", {"limit_mm_per_prompt": '{"image": 1}'})[0] is True
    text = type("M", (), {"architecture": "Gemma3ForCausalLM"})()  # model_type gemma3_text: not in the list
    assert mmprefix.decide(text, "0.33.0", {})[0] is False
    assert mmprefix.decide(model, "0.18.0", {})[0] is None  # before the first release read


def test_other_models_are_unchanged(img: Any) -> None:
    """A text model answers as before: no use_mm_prefix on the assumed line, the grid's plain point."""
    a = ask(img, gpu="h100", model="llama-3.1-8b", vllm="0.34.0", ctx="8k")
    assert "use_mm_prefix" not in a.assumed
    doc = vs_judge.load(DATA / "0.34.0" / "cc9.0.json.gz")
    plain = [p for p in vs_judge.rows(doc) if p["layout"] == "dense" and p["head_size"] == 128
             and p["dtype"] == "bfloat16" and p["kv"] == "auto" and p["block"] is None and not p["sink"]
             and p["trtllm"]]
    assert backend(a) == plain[0]["selected"]
    assert "use_mm_prefix" not in (a.engine.get("source") or "")


@pytest.fixture()
def before_the_axis(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A release (named 0.30.0) whose recorded grid predates the axis: 0.24.0's first grid (probe version 3, no
    mm_prefix column; BEFORE_THE_AXIS) in a folder of its own. The shipped 0.30.0 and 0.24.0 grids were recorded
    again with the axis."""
    import shutil

    (tmp_path / "0.30.0").mkdir()
    shutil.copy(BEFORE_THE_AXIS, tmp_path / "0.30.0" / "cc9.0.json.gz")
    shutil.copytree(DATA / "0.33.0", tmp_path / "0.33.0")
    monkeypatch.setattr(grid, "folders", lambda: [tmp_path])
    monkeypatch.setattr(grid, "_MEMO", {})
    return "0.30.0"


def test_a_grid_without_the_axis_answers_conditional(img: Any, before_the_axis: str) -> None:
    """A grid recorded before the axis (no mm_prefix column): the choice depends on use_mm_prefix, and the answer
    names the sweep that records it."""
    rel = before_the_axis
    assert not grid.has_mm_axis(rel, {"cc": 9.0})
    assert grid.has_mm_axis("0.33.0", {"cc": 9.0})
    a = ask(img, gpu="h100", model="gemma-3-27b", vllm=rel, ctx="8k")
    assert a.verdict == "conditional" and a.engine["state"] == "depends"
    assert "use_mm_prefix" in a.engine["error"]
    assert f"kb probe sweep --lib vllm --releases {rel}" in a.engine["error"]
    assert "use_mm_prefix" in answer_summary(a)


def test_old_grid_rows_are_read_as_not_asked(before_the_axis: str) -> None:
    """A row without the column ran vLLM's default (False): the reader finds it for a text model."""
    doc = vs_judge.load(BEFORE_THE_AXIS)
    assert "mm_prefix" not in doc["columns"]
    pts = vs_judge.rows(doc)
    assert pts and all(p["mm_prefix"] is None for p in pts)
    assert vs_judge.rows(doc, mm_prefix=True) == []
    env = {"cc": 9.0, "attention": "gqa", "head_dim": 128, "dtype": "bf16", "kv_cache_dtype": "auto"}
    assert grid.point(before_the_axis, env) is not None
    assert grid.point(before_the_axis, dict(env, mm_prefix=True)) is None
