"""Any vLLM release through `--vllm X` (kbtool/solve/engines/vllm/grid.py): a release answered from its own recorded
grid
gives what vLLM's selector gave at that grid point; a release with no record names the recorded releases
around it and is never answered as one of them."""

from __future__ import annotations

from functools import cache

import pytest

from kbtool.kb import load_kb
from kbtool.probe.judges import vllm_selector as vs_judge
from kbtool.solve import installs
from kbtool.solve.engines.vllm import grid
from kbtool.solve.engines.vllm import selection as engine
from kbtool.solve.image import Image
from kbtool.solve.imagebuild import image_of
from probes import vllm_selector as vs
from tests.util import RECORDS, ROOT


@cache
def image() -> Image:
    return image_of(load_kb(RECORDS)[0])


@pytest.mark.parametrize("release", ["0.19.1", "0.24.0", "0.33.0"])
def test_grid_answer_is_the_recorded_selection(release: str) -> None:
    img = image()
    rows = vs_judge.rows(vs.load(ROOT / "tests" / "data" / "vllm" / release / "cc9.0.json.gz"))
    for p in rows[::97]:  # a spread of grid points: every layout, head size, KV dtype, block and sink
        env = dict(vs_judge.grid_env(p), engine="vllm", vllm=release)
        sel = grid.select_unrecorded(img, env, release, None, "cuda", lambda v, e=env: engine.select(img, e, v))
        ids = {b.backend_name: b.id for b in img.backends("vllm")}
        want = ids[p["selected"]] if p["selected"] else None
        assert sel.selected == want, (p, sel.error)
        assert sel.source and "own selector grid" in sel.source
        for bid, c in sel.checks.items():
            assert [r.message for r in c.reasons] == list(p["reasons"][c.name]), bid


def test_unswept_release_names_both_neighbours() -> None:
    img = image()
    env = engine.vllm_env(9.0, dtype="bfloat16", kv="fp8", head_size=128, block=16, layout="dense", sink=False,
                          trtllm=True, archs=image().cc)
    sel = engine.select(img, env, "0.28.7")
    assert sel.selected is None and sel.error is None
    below, above = grid.neighbours("0.28.7", sorted(set(engine.versions(img)) | set(grid.recorded())))
    assert sel.between is not None and sel.between.startswith(f"between {below} (selects ")
    assert f" and {above} (selects " in sel.between and sel.between.endswith("): not swept")
    late = engine.select(img, env, "9.0.0")
    assert late.between is not None and late.between.startswith("after the newest recorded release")


def test_lib_release_without_evidence_names_the_probed_ones() -> None:
    from kbtool.solve.environment import unprobed

    probed = image().probed["flashinfer"]
    assert "0.6.18" in probed and "0.7.2.post1" in probed
    assert unprobed(probed, "flashinfer", "0.6.18") is None
    note = unprobed(["0.6.18", "0.7.2.post1"], "flashinfer", "0.7.0")
    assert note == "0.7.0 not probed: between 0.6.18 and 0.7.2.post1 (probed); its claims' own scopes only"
    assert unprobed(["0.6.18"], "flashinfer", "0.9.0") == \
        "0.9.0 not probed: after the newest probed 0.6.18; its claims' own scopes only"



def test_an_answer_names_the_override_the_release_was_installed_with(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 46: vLLM 0.34.0 pins flashinfer-python==0.7.3, which PyPI lacks; its sweep installed 0.7.4 instead
    (probes/sweep-overrides.yaml), its evidence says so, and an answer from its grid names it. The evidence here
    is the environment block `kb probe run` writes (kbtool/probe/evidence.py), in a scratch tree."""
    import kbtool.paths
    from kbtool.probe import evidence as ev_io

    env = ev_io.environment_model({"gpu": "no GPU (vllm 0.34.0)", "compute_capability": "n/a",
                                   "libraries": {"vllm": "0.34.0"}, "install_overrides": ["flashinfer-python==0.7.4"]})
    from kbtool.store.writer import dump

    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "e.yaml").write_text(dump({"id": "e", "environment": env.model_dump(exclude_none=True)}))
    (tmp_path / "evidence" / "plain.yaml").write_text(dump({"id": "plain", "environment": {"gpu": "no GPU"}}))
    monkeypatch.setattr(kbtool.paths, "records_dir", lambda: tmp_path)
    installs.forget()
    try:
        assert installs.install_overrides("e") == ("flashinfer-python==0.7.4",)
        assert installs.install_overrides("plain") == () and installs.install_overrides("missing") == ()
    finally:
        installs.forget()


@pytest.mark.parametrize(("change", "name"), [({"dtype": "fp32"}, "the model dtype"), ({"head_dim": 112}, "head size"),
                                              ({"block_size": 48}, "block size")])
def test_an_input_the_grid_does_not_ask_is_depended_on_not_refused(change: dict, name: str) -> None:
    """An input off the axes the release's grid asked (a float32 model, an unswept head size or block size) has no
    recorded point: vLLM's choice depends on it, named with the values the grid asks; vLLM is not said to refuse."""
    img = image()
    rows = vs_judge.rows(vs.load(ROOT / "tests" / "data" / "vllm" / "0.26.0" / "cc9.0.json.gz"))
    p = next(r for r in rows if r["layout"] == "dense" and r["selected"])
    env = dict(vs_judge.grid_env(p), engine="vllm", vllm="0.26.0")
    assert grid.off_axis("0.26.0", env) is None  # on the grid as recorded
    env.update(change)
    sel = grid.from_grid(img, env, "0.26.0", None, "cuda")
    assert sel.selected is None and sel.error is not None
    assert sel.error.startswith(f"depends on {name} "), sel.error
    assert "its recorded grid does not ask" in sel.error


@pytest.mark.parametrize(("cc", "on_grid"), [(7.5, False), (7.0, False), (8.6, True), (8.9, True)])
def test_a_compute_capability_off_the_grids_is_a_dependency_not_a_refusal(cc: float, on_grid: bool) -> None:
    """A release answered from its recorded grids, asked for a device whose compute capability no grid covers (the
    T4's 7.5, a V100's 7.0), says its choice depends on it and names the grids and the sweep: never "refuses", and
    never another capability's answer. A capability with a grid is answered from it (the A40's 8.6, the RTX 6000
    Ada's 8.9)."""
    img = image()
    release = "0.28.0"
    env = {"cc": cc, "engine": "vllm", "vllm": release, "attention": "gqa", "head_dim": 128, "dtype": "bf16",
           "kv_cache_dtype": "auto", "block_size": 16, "sinks": False, "trtllm_kernels": True}
    sel = grid.from_grid(img, env, release, None, "cuda")
    have = sorted(p.name[2:-8] for p in (ROOT / "tests" / "data" / "vllm" / release).glob("cc*.json.gz"))
    if on_grid:
        assert sel.selected is not None and not sel.error, sel.error
        assert f"{cc:.1f}" in have
        return
    assert sel.selected is None and f"{cc:.1f}" not in have
    assert str(sel.error).startswith(f"depends on compute capability {cc:.1f}, ")
    assert all(c in str(sel.error) for c in have) and "kb probe sweep" in str(sel.error)
