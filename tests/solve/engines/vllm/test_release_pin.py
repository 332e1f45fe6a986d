"""Which vLLM release an answer is for when --vllm is not given (selection.pin_release): the newest release kb
records priority lists for, and the assumed: line says so and names the newer releases answered from their
recorded grids only."""

from __future__ import annotations

from kbtool import query_cli
from kbtool.solve.conditions import compare_versions
from kbtool.solve.engines.vllm import grid
from kbtool.solve.engines.vllm.selected import versions
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve


def test_the_default_release_is_named_with_the_newer_grid_only_releases() -> None:
    img = query_cli.image()
    a = solve(img, build_query(gpu="h100", engine="vllm"))
    pinned = versions(img)[-1]
    newer = [v for v in grid.recorded() if compare_versions(v, pinned) > 0]
    note = a.assumed["vllm"]
    assert note.startswith(f"{pinned} (the newest release kb records priority lists for")
    for v in newer:
        assert v in note
    if newer:
        assert f"--vllm {newer[-1]}" in note


def test_an_asked_release_carries_no_note() -> None:
    a = solve(query_cli.image(), build_query(gpu="h100", engine="vllm", vllm="0.33.0"))
    assert "vllm" not in a.assumed
