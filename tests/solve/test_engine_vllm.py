"""kb's vLLM engine layer against vLLM's own selector, on the grid the vllm-selector probe recorded (issue 18).

tests/data/vllm/<release>/cc*.json.gz are the probe's raw per-case files: vLLM's `validate_configuration`
reasons for every backend and its selection at each grid point. No vLLM is needed here. For each backend the
test counts the points where kb's status (valid = ok or caveat) agrees with vLLM (valid = no reasons), on all
points and on the points vLLM accepts, and whether kb names the backend vLLM selects. The agreement table is
printed (see it with pytest -s).

The default run compares a stratified sample (every point of a stratum (cc, layout, dtype, KV dtype, block, sinks,
TRT-LLM) in turn, one in SAMPLE_EVERY, each stratum at least once); the whole grid runs under the `full_grid`
marker (`pytest -m full_grid --full-grid`, once in .ci/run).
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from typing import Any

import pytest

from kbtool.kb import load_kb
from kbtool.probe.judges import vllm_selector as vs_judge
from kbtool.solve import gates
from kbtool.solve.engines.vllm import selection as engine
from kbtool.solve.image import Image
from kbtool.solve.imagebuild import image_of
from probes import vllm_selector as vs
from tests.util import RECORDS, ROOT

DATA = ROOT / "tests" / "data" / "vllm"


@cache
def image() -> Image:
    return image_of(load_kb(RECORDS)[0])


@cache
def points(release: str) -> tuple[dict[str, Any], ...]:
    out: list[dict[str, Any]] = []
    for f in sorted((DATA / release).glob("cc*.json.gz")):
        out += vs_judge.rows(vs.load(f))
    return tuple(out)


SAMPLE_EVERY = 8
FULL = [False, pytest.param(True, marks=pytest.mark.full_grid, id="full-grid")]


def stratified(release: str) -> tuple[dict[str, Any], ...]:
    """One point in SAMPLE_EVERY of each stratum, at least one per stratum, the strata taking their head sizes in
    turn (a stratum is one point per head size)."""
    strata: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for p in points(release):
        strata[(p["cc"], p["layout"], p["dtype"], p["kv"], p["block"], p["sink"], p["trtllm"])].append(p)
    out: list[dict[str, Any]] = []
    for i, key in enumerate(sorted(strata, key=repr)):
        group = strata[key]
        out += group[i % min(len(group), SAMPLE_EVERY)::SAMPLE_EVERY]
    return tuple(out)


def compare(release: str, full: bool = True) -> tuple[dict[str, list[int]], int, list[tuple[dict[str, Any],
                                                                                         str | None]]]:
    """Per backend [agree, total, vllm_accepts, kb_accepts_of_those]; selections right; the wrong ones; over
    the whole grid or the stratified sample."""
    img = image()
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    right, wrong = 0, []
    # every backend with gates for this release, in a priority list or not (FLASH_ATTN_DIFFKV, ...)
    gated = [b for b in img.backends("vllm") if any(gates.in_scope(c, {"vllm": release}) and c.scope
                                                    for c in img.claims(b.id))]
    for p in points(release) if full else stratified(release):
        env = vs_judge.grid_env(p)
        sel = engine.select(img, env, release)
        checks = dict(sel.checks)
        full = dict(env, engine="vllm", vllm=release)
        for b in gated:
            if b.id not in checks:
                checks[b.id] = engine.check(img, b, full, release)
        for c in checks.values():
            if c.name not in p["reasons"]:
                continue
            v_ok = not p["reasons"][c.name]
            row = table[c.name]
            row[0] += v_ok == c.valid
            row[1] += 1
            if v_ok:
                row[2] += 1
                row[3] += c.valid
        name = sel.checks[sel.selected].name if sel.selected else None
        if name == p["selected"]:
            right += 1
        else:
            wrong.append((p, name))
    return dict(table), right, wrong


def agreement_table(release: str, table: dict[str, list[int]], right: int, n: int) -> str:
    lines = [f"vLLM {release}: kb engine layer vs vLLM validate_configuration over {n} grid points",
             f"{'backend':30} {'agree/all':>16} {'%':>7} {'agree/accepted':>16}"]
    for name, (a, t, acc, ka) in sorted(table.items()):
        lines.append(f"{name:30} {f'{a}/{t}':>16} {100 * a / t:7.2f} {f'{ka}/{acc}':>16}")
    lines.append(f"selection: kb names vLLM's backend at {right}/{n} points")
    return "\n".join(lines)


@pytest.mark.skipif(not (DATA / "0.33.0").is_dir(), reason="no recorded vLLM 0.33.0 selector grid")
@pytest.mark.parametrize("full", FULL)
def test_engine_layer_agrees_with_vllm_0_33_0(full: bool) -> None:
    table, right, wrong = compare("0.33.0", full)
    n = len(points("0.33.0"))
    print("\n" + agreement_table("0.33.0", table, right, n if full else len(stratified("0.33.0"))))
    assert n > 10000 and len(table) >= 18  # the grid; the priority lists' backends and the DiffKV ones
    assert {"FLASH_ATTN_DIFFKV", "TRITON_ATTN_DIFFKV", "TOKENSPEED_MLA", "FLASHINFER_MLA_SPARSE_SM90"} <= set(table)
    for name, (agree, total, accepted, kb_accepted) in table.items():
        assert kb_accepted == accepted, f"{name}: kb refuses {accepted - kb_accepted} configurations vLLM accepts"
        assert agree >= 0.99 * total, f"{name}: {agree}/{total} agree"
    assert not wrong, f"kb names another backend than vLLM at {len(wrong)} points, e.g. " \
        f"{vs_judge._label(wrong[0][0])}: vLLM {wrong[0][0]['selected']}, kb {wrong[0][1]}"


@pytest.mark.skipif(not (DATA / "0.34.0").is_dir(), reason="no recorded vLLM 0.34.0 selector grid")
@pytest.mark.parametrize("full", FULL)
def test_engine_layer_agrees_with_vllm_0_34_0(full: bool) -> None:
    """0.34.0 has its own priority record; its claims are 0.33.0's gates its code keeps plus the 0.34.0 ones (FA4's
    SM90 head-512 fp8 block rule, DiffKV's value head in the FA version check): kb must agree with vLLM everywhere."""
    table, right, wrong = compare("0.34.0", full)
    n = len(points("0.34.0"))
    print("\n" + agreement_table("0.34.0", table, right, n if full else len(stratified("0.34.0"))))
    assert n > 10000 and len(table) >= 18
    assert {"FLASH_ATTN_DIFFKV", "TRITON_ATTN_DIFFKV", "TOKENSPEED_MLA", "FLASHINFER_MLA_SPARSE_SM90"} <= set(table)
    for name, (agree, total, accepted, kb_accepted) in table.items():
        assert kb_accepted == accepted, f"{name}: kb refuses {accepted - kb_accepted} configurations vLLM accepts"
        assert agree == total, f"{name}: {agree}/{total} agree"
    assert not wrong, f"kb names another backend than vLLM at {len(wrong)} points, e.g. " \
        f"{vs_judge._label(wrong[0][0])}: vLLM {wrong[0][0]['selected']}, kb {wrong[0][1]}"
    # what sets 0.34.0 apart from 0.33.0: FLASH_ATTN on cc 9.0 at head 512 with fp8 KV needs a block multiple of 64
    sm90 = [p for p in points("0.34.0") if p["cc"] == "9.0" and p["layout"] == "dense" and p["head_size"] == 512
            and p["kv"] in ("fp8", "fp8_e4m3") and p["block"] in (16, 32)]
    assert sm90 and all(any("divisible by 64" in r for r in p["reasons"]["FLASH_ATTN"]) for p in sm90)


@pytest.mark.skipif(not (DATA / "0.24.0").is_dir(), reason="no recorded vLLM 0.24.0 selector grid")
@pytest.mark.parametrize("full", FULL)
def test_engine_layer_agrees_with_vllm_0_24_0(full: bool) -> None:
    """0.24.0 has its own priority record and claims (the 0.33.0 gates its code shares, widened, plus 0.24.0-only
    ones): kb must agree with vLLM everywhere, as for 0.33.0."""
    table, right, wrong = compare("0.24.0", full)
    n = len(points("0.24.0"))
    print("\n" + agreement_table("0.24.0", table, right, n if full else len(stratified("0.24.0"))))
    assert n > 10000 and len(table) >= 17
    assert {"FLASH_ATTN_DIFFKV", "TRITON_ATTN_DIFFKV", "TOKENSPEED_MLA", "FLASHINFER_MLA_SPARSE_SM120"} <= set(table)
    assert not {"FLASH_ATTN_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90"} & set(table)  # not registered in 0.24.0
    for name, (agree, total, accepted, kb_accepted) in table.items():
        assert kb_accepted == accepted, f"{name}: kb refuses {accepted - kb_accepted} configurations vLLM accepts"
        assert agree >= 0.99 * total, f"{name}: {agree}/{total} agree"
    assert not wrong, f"kb names another backend than vLLM at {len(wrong)} points, e.g. " \
        f"{vs_judge._label(wrong[0][0])}: vLLM {wrong[0][0]['selected']}, kb {wrong[0][1]}"
    # what sets 0.24.0 apart from 0.33.0: no FA4 fp8 KV on cc 10.x, MLA head size 512 refused
    fp8_cc10 = [p for p in points("0.24.0") if p["cc"] == "10.0" and p["layout"] == "dense" and p["kv"] == "fp8"]
    assert fp8_cc10 and all("kv_cache_dtype not supported" in p["reasons"]["FLASH_ATTN"] for p in fp8_cc10)
    mla512 = [p for p in points("0.24.0") if p["layout"] == "mla" and p["head_size"] == 512]
    assert mla512 and all("head_size not supported" in p["reasons"]["FLASHINFER_MLA"] for p in mla512)


@pytest.mark.skipif(not (DATA / "0.19.1").is_dir(), reason="no recorded vLLM 0.19.1 selector grid")
@pytest.mark.parametrize("full", FULL)
def test_older_release_is_compared_with_its_own_claims(full: bool) -> None:
    """0.19.1 has only the seed-era claims: the table is reported; FLASHINFER's head sizes differ from 0.33.0."""
    table, right, _ = compare("0.19.1", full)
    print("\n" + agreement_table("0.19.1", table, right, len(points("0.19.1") if full else stratified("0.19.1"))))
    assert "FLASHINFER" in table
    hd512 = [p for p in points("0.19.1") if p["layout"] == "dense" and p["head_size"] == 512]
    assert hd512 and all("head_size not supported" in p["reasons"]["FLASHINFER"] for p in hd512)
    hd512_new = [p for p in points("0.33.0") if p["layout"] == "dense" and p["head_size"] == 512] \
        if (DATA / "0.33.0").is_dir() else []
    assert all("head_size not supported" not in p["reasons"]["FLASHINFER"] for p in hd512_new)


def test_grid_env_maps_vllm_spellings() -> None:
    env = engine.vllm_env(9.0, dtype="bfloat16", kv="auto", head_size=576, block=None, layout="sparse",
                          sink=False, trtllm=True, archs=image().cc)
    assert env["kv_dtype"] == "bf16" and env["attention"] == "sparse-mla" and env["sm"] == "sm90"
    assert "block_size" not in env
    env = engine.vllm_env(10.0, dtype="float16", kv="fp8", head_size=128, block=64, layout="dense",
                          sink=True, trtllm=False, archs=image().cc)
    assert env["sm"] == "sm100"
    assert "sm" not in engine.vllm_env(8.7, dtype="bfloat16", kv="auto", head_size=128, block=None, layout="dense",
                                       sink=False, trtllm=True, archs=image().cc)  # no architecture record has 8.7
    assert (env["kv_dtype"], env["kv_cache_dtype"], env["block_size"], env["dtype"]) == ("fp8_e4m3", "fp8", 64,
                                                                                         "fp16")


def test_explicit_backend_is_refused_with_its_reasons() -> None:
    env = engine.vllm_env(9.0, dtype="bfloat16", kv="fp8", head_size=128, block=None, layout="dense", sink=False,
                          trtllm=True, archs=image().cc)
    sel = engine.select(image(), env, "0.33.0", requested="FLEX_ATTENTION")
    assert sel.selected is None
    assert sel.error is not None and sel.error.startswith(
        "Selected backend AttentionBackendEnum.FLEX_ATTENTION is not valid for this configuration.")
    assert "kv_cache_dtype" in sel.error
    ok = engine.select(image(), env, "0.33.0", requested="TRITON_ATTN")
    assert ok.selected == "vllm-triton-attn" and ok.error is None


def test_the_sample_covers_every_stratum_and_is_smaller() -> None:
    for release in ("0.33.0", "0.24.0", "0.19.1"):
        if not (DATA / release).is_dir():
            continue
        every, sample = points(release), stratified(release)
        key = ("cc", "layout", "dtype", "kv", "block", "sink", "trtllm")
        assert {tuple(p[k] for k in key) for p in sample} == {tuple(p[k] for k in key) for p in every}
        assert len(sample) < len(every) / 4
        assert {p["head_size"] for p in sample} == {p["head_size"] for p in every}


def test_the_registry_names_the_boot_error_record_boots_py_writes() -> None:
    from kbtool.solve.engines.registry import ENGINES
    from kbtool.solve.engines.vllm.boots import RECORD_ID

    assert ENGINES["vllm"].boot_error_record == RECORD_ID
