"""Encoders in the weights (kbtool/solve/weights.py) and the serve lines under which vLLM skips them
(kbtool/solve/engines/vllm/mmprefix.py towers_off; vllm/model_executor/models/interfaces.py:347-400 and
vllm/config/multimodal.py:700 in 0.33.0, the same in 0.19.1, 0.24.0 and 0.26.0)."""

from __future__ import annotations

from kbtool.query_cli import image
from kbtool.solve.engines.vllm.mmprefix import towers_off
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from kbtool.solve.weights import tower_bytes, weight_bytes


def _model(mid: str):
    return image().model(mid)


def test_weights_include_the_tower_at_the_model_dtype() -> None:
    m = _model("gemma-3-27b")
    text = m.parameters * 2
    total, how = weight_bytes(m)
    assert total == text + m.encoders[0]["parameters"] * 2
    assert "vision tower 0.42B x 2 B (bf16)" in how
    # an fp8 deployment quantizes the text model; the tower stays at the model dtype
    fp8, _ = weight_bytes(m, "fp8")
    assert fp8 - weight_bytes(m, "fp8", text_only="--language-model-only")[0] == m.encoders[0]["parameters"] * 2


def test_text_only_serve_lines_leave_the_tower_out() -> None:
    m = _model("qwen3-vl-8b")
    assert towers_off(m, {}) is None
    assert towers_off(m, {"language_model_only": True}) == "--language-model-only"
    # Qwen3-VL's tower serves image and video: both must be 0
    assert towers_off(m, {"limit_mm_per_prompt": '{"image": 0}'}) is None
    assert towers_off(m, {"limit_mm_per_prompt": '{"image": 0, "video": 0}'}) == \
        "--limit-mm-per-prompt image: 0, video: 0"
    full, _ = weight_bytes(m)
    off, how = weight_bytes(m, text_only="--language-model-only")
    assert full - off == m.encoders[0]["parameters"] * 2 and "vision" not in how


def test_a_model_without_encoders_is_unchanged() -> None:
    m = _model("qwen3-8b")
    assert not getattr(m, "encoders", None)
    assert towers_off(m, {"language_model_only": True}) is None
    assert weight_bytes(m) == weight_bytes(m, text_only="--language-model-only")
    assert tower_bytes(m) == (0, "")


def _answer(line: str | None, engine: str | None = "vllm"):
    q = build_query(gpu="h100", model=None if line else "gemma-3-27b", ctx="32k", engine=None if line else engine,
                    vllm_args=line)
    return solve(image(), q)


def test_the_answer_names_the_tower_and_the_pool_shrinks_by_it() -> None:
    on = _answer(None)
    off = _answer("serve google/gemma-3-27b-it --max-model-len 32768 --language-model-only")
    assert on.memory is not None and off.memory is not None
    assert on.assumed["vision tower"] == "0.85 GB in the weights (vLLM loads it)"
    assert off.assumed["vision tower"] == "0.85 GB left out of the weights: --language-model-only"
    assert on.memory.weights_bytes - off.memory.weights_bytes == 423_060_336 * 2
    neutral = _answer(None, engine=None)
    assert neutral.memory is not None and "in the weights" in neutral.assumed["vision tower"]
