"""vLLM's MLA prefill order comes from each release's engine-priority record (`mla_prefill`), read through the
query image, never from a table in Python: every vLLM record carries it, each recorded release answers from its
own record, and a release without one says so instead of borrowing another release's order."""

from __future__ import annotations

from functools import cache

import pytest
from pydantic import ValidationError

from kbtool.kb import load_kb
from kbtool.model.engine_priority import EnginePriority
from kbtool.solve.engines.vllm import selection
from kbtool.solve.image import Image
from kbtool.solve.imagebuild import image_of
from tests.util import RECORDS

DSV3 = {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}  # DeepSeek-V3 / R1
GLM5 = {"qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256}  # the 192/64/256 shape (GLM-5)


@cache
def kb_and_image() -> tuple[object, Image]:
    kb = load_kb(RECORDS)[0]
    return kb, image_of(kb)  # type: ignore[arg-type]


def env(cc: float | None, shape: dict[str, int], vendor: str = "nvidia") -> dict[str, object]:
    e: dict[str, object] = {"attention": "mla", "kv_dtype": "bf16", "head_dim": 576, "vendor": vendor, **shape}
    if cc is not None:
        e["cc"] = cc
    return e


def vllm_records() -> list[EnginePriority]:
    kb, _img = kb_and_image()
    return [r for r in kb if isinstance(r, EnginePriority) and r.engine == "vllm"]  # type: ignore[attr-defined]


def test_every_vllm_record_carries_its_prefill_order_with_sources() -> None:
    recs = vllm_records()
    assert {(r.platform, r.scope[0].introduced) for r in recs} >= {
        ("cuda", "0.19.1"), ("cuda", "0.24.0"), ("cuda", "0.33.0"), ("rocm", "0.33.0")}
    for r in recs:
        assert r.mla_prefill is not None, r.id
        assert r.mla_prefill.lists[-1].when is None, f"{r.id}: the last prefill order must hold everywhere"
        for pl in r.mla_prefill.lists:
            src = r.sources[pl.source]
            assert src.repo == "vllm-project/vllm" and src.path and src.commit and src.line, r.id


def test_a_vllm_record_without_prefill_order_is_refused() -> None:
    rec = next(r for r in vllm_records() if r.platform == "cuda")
    data = rec.model_dump(by_alias=True, exclude_none=True)
    data.pop("mla_prefill")
    with pytest.raises(ValidationError, match="mla_prefill"):
        EnginePriority.model_validate(data)


@pytest.mark.parametrize(("release", "cc", "shape", "want"), [
    # vllm/platforms/interface.py:462-482 at 4ba787ec9 (v0.33.0)
    ("0.33.0", 10.0, DSV3, ["FLASH_ATTN (varlen)", "TRTLLM_RAGGED", "FLASHINFER", "TOKENSPEED_MLA"]),
    ("0.33.0", 10.0, GLM5, ["TRTLLM_RAGGED", "FLASH_ATTN (varlen)", "FLASHINFER", "TOKENSPEED_MLA"]),
    ("0.33.0", 9.0, GLM5, ["FLASH_ATTN (varlen)"]),
    # vllm/v1/attention/backends/mla/prefill/selector.py:48-69 at ee0da84ab (v0.24.0): no 192/64/256 exception
    ("0.24.0", 10.0, GLM5, ["FLASH_ATTN (varlen)", "TRTLLM_RAGGED", "FLASHINFER", "TOKENSPEED_MLA"]),
    ("0.24.0", 9.0, DSV3, ["FLASH_ATTN (varlen)"]),
    # v0.19.1 has no prefill selector: FlashAttention unless an opt-in switch is set (mla_attention.py:2111-2166)
    ("0.19.1", 10.0, GLM5, ["FLASH_ATTN (varlen)"]),
    ("0.19.1", 10.0, DSV3, ["FLASH_ATTN (varlen)"]),
    ("0.19.1", 9.0, DSV3, ["FLASH_ATTN (varlen)"]),
])
def test_recorded_release_answers_from_its_own_record(release: str, cc: float, shape: dict[str, int],
                                                      want: list[str]) -> None:
    _kb, img = kb_and_image()
    got = selection.mla_path(img, env(cc, shape), "X", release)
    assert got["prefill"] == want
    assert "prefill_unrecorded" not in got
    rec = next(r for r in vllm_records() if r.platform == "cuda" and r.scope[0].introduced == release)
    assert got["prefill_source"] in {s.locator() for s in rec.sources}


def test_rocm_skips_the_backend_its_defaults_refuse() -> None:
    _kb, img = kb_and_image()
    got = selection.mla_path(img, env(None, DSV3, vendor="amd"), "TRITON_MLA", "0.33.0")
    assert got["prefill"] == ["FLASH_ATTN (varlen)"]  # vllm/platforms/rocm.py:969-1018 at 4ba787ec9
    assert [r.split(":")[0] for r in got["prefill_refused"]] == ["ROCM_AITER_FA"]
    assert "rocm.py" in got["prefill_source"]


@pytest.mark.parametrize("release", ["0.27.1", "0.20.1", "0.99.0", None])
def test_release_without_a_record_says_so_and_borrows_nothing(release: str | None) -> None:
    _kb, img = kb_and_image()
    for cc, shape in ((10.0, GLM5), (10.0, DSV3), (9.0, DSV3)):
        got = selection.mla_path(img, env(cc, shape), "X", release)
        assert got["prefill"] == [], (release, cc)
        assert "not recorded" in got["prefill_unrecorded"]
        assert "prefill_source" not in got


def test_no_prefill_table_is_left_in_python() -> None:
    for name in ("MLA_PREFILL", "NO_192_256_PREFILL"):
        assert not hasattr(selection, name), name


def test_every_recorded_release_has_a_prefill_order_in_the_image() -> None:
    _kb, img = kb_and_image()
    rows = img.engine_data("vllm")["mla_prefill"]
    for version in selection.versions(img):
        for platform in {p for _i, _e, p, scope, _l in img.priorities("vllm") if selection._in_range(version, scope)}:
            assert any(plat == platform and selection._in_range(version, scope) for _i, plat, scope, _l, _c in rows), \
                (version, platform)
            assert selection.prefill_order(img, env(10.0, DSV3), version, platform) is not None, (version, platform)
