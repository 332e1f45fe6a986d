from __future__ import annotations

from kbtool.bench.backends import check_dispatch, for_phase, predicted_bytes
from kbtool.measure import grid
from kbtool.measure.grid import Config


def test_kv_bytes_match_the_studys_byte_model() -> None:
    # seed 000: batch 1, N=16,384, 32 KV heads -> 268 MB; 8 KV heads -> 67 MB (head_dim 128, bf16)
    assert Config("decode", 1, 16384, 32, 32, 128, "bf16").kv_bytes() == 268_435_456
    assert Config("decode", 1, 16384, 32, 8, 128, "bf16").kv_bytes() == 67_108_864


def test_quick_grid_keeps_the_studys_comparison_cells() -> None:
    q = grid.quick()
    keys = {c.key() for c in q.configs()}
    assert len(keys) == len(q.configs())
    assert "decode-b32-kv16384-h32-hkv8-d128-bf16-eager" in keys
    assert {"prefill-b4-n256-h16-hkv16-d128-bf16-full", "prefill-b4-n8192-h16-hkv16-d128-bf16-full"} <= keys
    assert {f"decode-b1-kv{n}-h32-hkv8-d128-bf16-eager" for n in (512, 16384)} <= keys
    assert any(c.graphs for c in q.decode) and any(not c.graphs for c in q.decode)
    attempts = sum(len(for_phase(c.phase)) for c in q.configs())
    assert attempts < 400  # x 3 process launches must fit one call


def test_conditions_round_trip() -> None:
    for c in grid.full().configs()[::37]:
        assert Config.from_conditions(c.phase, c.conditions()) == c
    assert Config.from_conditions("decode", {"batch": 1}) is None


def test_math_backend_predicts_its_score_matrix() -> None:
    big = Config("prefill", 16, 8192, 16, 16, 128, "bf16")
    assert predicted_bytes("sdpa-math", big) > 3 * 16 * 16 * 8192 * 8192 * 4
    assert predicted_bytes("sdpa-flash", big) < predicted_bytes("sdpa-math", big) / 10


def test_dispatch_check() -> None:
    assert check_dispatch("sdpa-flash", ["void pytorch_flash::flash_fwd_kernel<...>"]) == "match"
    assert check_dispatch("sdpa-flash", ["fmha_cutlassF_bf16_aligned_64x64_rf_sm80"]) == "mismatch"
    assert check_dispatch("triton", []) == "unprobed"
