"""Sliding-window layers under vLLM (issue 46): from 0.26.0 vLLM's selector passes `has_sliding_window` for a layer
with a window (vllm/model_executor/layers/attention/attention.py:381 in 0.34.0) and each backend's
validate_configuration refuses it unless the backend declares supports_sliding_window (vllm/v1/attention/backend.py:335
in 0.34.0). The vllm-selector probe asks it (version 5); kb answers with the model's window: from the
release's claims (0.33.0, 0.34.0 have priority records) or from its recorded grid at the sliding point."""

from __future__ import annotations

from typing import Any

import pytest

from kbtool import query_cli
from kbtool.probe.judges import vllm_selector as vs_judge
from kbtool.solve.engines.vllm import grid
from kbtool.solve.engines.vllm import selection as engine
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from tests.util import ROOT

DATA = ROOT / "tests" / "data" / "vllm"


@pytest.fixture(scope="module")
def img() -> Any:
    return query_cli.image()


def mla_env(img: Any, window: int) -> dict[str, Any]:
    """A DeepSeek-shaped MLA decode layer on an H100 (latent 576, bf16, KV auto, vLLM's block) with `window`."""
    env = engine.vllm_env(9.0, dtype="bfloat16", kv="auto", head_size=576, block=None, layout="mla", sink=False,
                          trtllm=True, archs=img.cc, num_heads=128)
    return dict(env, sliding_window=window)


def recorded(release: str, cc: str, layout: str, head: int, sliding: bool) -> dict[str, Any]:
    doc = vs_judge.load(DATA / release / f"cc{cc}.json.gz")
    found = [p for p in vs_judge.rows(doc) if p["layout"] == layout and p["head_size"] == head
             and p["dtype"] == "bfloat16" and p["kv"] == "auto" and p["block"] is None and not p["sink"]
             and p["trtllm"] and p["sliding"] is sliding]
    assert len(found) == 1, found
    return found[0]


def name(img: Any, sel: Any) -> str | None:
    return sel.checks[sel.selected].name if sel.selected else None


@pytest.mark.parametrize(("release", "windowed"), [("0.33.0", None), ("0.34.0", "TRITON_MLA")])
def test_mla_layer_with_a_window_follows_the_release(img: Any, release: str, windowed: str | None) -> None:
    """Every MLA backend refuses a window in 0.33.0 (no backend: vLLM raises); 0.34.0's TRITON_MLA serves it
    (decode). kb's claims give vLLM's recorded choice at both points."""
    on, off = recorded(release, "9.0", "mla", 576, True), recorded(release, "9.0", "mla", 576, False)
    assert (on["selected"], off["selected"]) == (windowed, "FLASH_ATTN_MLA")
    assert "sliding window not supported" in on["reasons"]["FLASH_ATTN_MLA"]
    sel = engine.select(img, mla_env(img, 4096), release)
    assert name(img, sel) == windowed
    assert name(img, engine.select(img, mla_env(img, 0), release)) == "FLASH_ATTN_MLA"
    codes = {r.code for r in sel.checks["vllm-flash-attn-mla"].reasons}
    assert "SLIDING_WINDOW" in codes
    if windowed is None:
        assert sel.error == "No valid attention backend found for cuda"


def test_a_recorded_grid_is_read_at_the_sliding_point(img: Any) -> None:
    """0.26.0 has no priority records: its grid answers, at has_sliding_window True for a windowed layer."""
    env = mla_env(img, 4096)
    on, off = grid.point("0.26.0", env), grid.point("0.26.0", dict(env, sliding_window=0))
    assert on is not None and off is not None
    assert on["selected"] is None and off["selected"] == recorded("0.26.0", "9.0", "mla", 576, False)["selected"]
    assert "sliding window not supported" in on["reasons"]["TRITON_MLA"]
    sel = engine.select(img, env, "0.26.0")
    assert sel.selected is None and "at has_sliding_window True" in str(sel.source)


def test_a_grid_without_the_axis_says_what_the_answer_depends_on(img: Any, tmp_path: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A release whose selector reads the window but whose grid predates the axis (probe version 4) is not read at
    the point without a window: the answer depends on it, with the sweep that records it. A release before
    grid.SLIDING_FROM, whose selector has no such field, is read as recorded."""
    import shutil

    for rel, src in (("0.27.0", "0.25.1"), ("0.25.1", "0.25.1")):
        (tmp_path / rel).mkdir()
        shutil.copy(DATA / src / "cc9.0.json.gz", tmp_path / rel / "cc9.0.json.gz")
    monkeypatch.setattr(grid, "folders", lambda: [tmp_path])
    monkeypatch.setattr(grid, "_MEMO", {})
    env = engine.vllm_env(9.0, dtype="bfloat16", kv="auto", head_size=128, block=None, layout="dense", sink=False,
                          trtllm=True, archs=img.cc)
    windowed = dict(env, sliding_window=4096)
    assert grid.sliding_unasked("0.27.0", windowed) and not grid.sliding_unasked("0.27.0", env)
    assert not grid.sliding_unasked("0.25.1", windowed)
    sel = grid.from_grid(img, windowed, "0.27.0", None, "cuda")
    assert sel.selected is None and str(sel.error).startswith("depends on has_sliding_window")
    assert "--releases 0.27.0 --force" in str(sel.error)
    assert grid.from_grid(img, env, "0.27.0", None, "cuda").selected == "vllm-flash-attn"
    assert grid.from_grid(img, windowed, "0.25.1", None, "cuda").selected == "vllm-flash-attn"


@pytest.mark.parametrize(("model", "gpu"), [("gpt-oss-20b", "h100"), ("gemma-3-27b", "h100"),
                                             ("gemma-2-9b-it", "a100"), ("gpt-oss-120b", "b200")])
def test_a_sliding_window_model_is_asked_with_its_window(img: Any, model: str, gpu: str) -> None:
    """The query passes the model's window to vLLM's selection; the answer is the recorded grid point of the
    model's sliding layers (has_sliding_window True) of the same configuration."""
    seen: list[dict[str, Any]] = []
    real = engine.select

    def spy(*args: Any, **kw: Any) -> Any:
        seen.append(dict(args[1]))
        return real(*args, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "select", spy)
        a = solve(img, build_query(engine="vllm", gpu=gpu, model=model, vllm="0.34.0", ctx="8k"))
    env = seen[0]
    assert env["sliding_window"] > 0
    p = grid.point("0.34.0", env)
    assert p is not None
    names = {b.id: b.backend_name for b in img.backends("vllm")}
    assert names[a.engine["selected"]] == p["selected"]


def test_a_model_whose_every_layer_slides_is_not_called_a_hybrid(img: Any) -> None:
    """Phi-3-mini-4k slides on all 32 layers (window 2047, CacheConfig.sliding_window): its boots' error class is
    its own, not the sliding-window hybrids' (Gemma 2/3, gpt-oss), whose full layers hold the whole context."""
    from kbtool.solve.engines.vllm.boots import model_class

    assert model_class(img.model("phi-3-mini-4k-instruct")) == "sliding-window"
    assert model_class(img.model("gemma-3-27b")) == "sliding-window hybrid"
    a = solve(img, build_query(gpu="l4", model="phi-3-mini-4k-instruct", ctx="4k", engine="vllm"))
    assert "of sliding-window models recorded" in a.memory.engine_report["text"]  # type: ignore[union-attr]
