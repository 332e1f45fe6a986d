from __future__ import annotations

import pytest

from kbtool.measure.stats import (
    Timing,
    bootstrap_ratio_lower,
    median,
    percentile,
    separate,
    transfer,
    winners,
)


def T(*xs: float, ok: bool = True) -> Timing:
    return Timing(tuple(xs), ok)


def test_median_and_percentile_known_values() -> None:
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 2, 3]) == 2.5
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile(list(range(1, 101)), 95) == pytest.approx(95.05)
    assert percentile([7.0], 95) == 7.0
    with pytest.raises(ValueError):
        median([])


def test_clearly_faster_backend_is_separated() -> None:
    s = separate("c", {"a": T(100, 101, 99, 100, 102), "b": T(150, 151, 149, 152, 150)})
    assert s.verdict == "separated"
    assert s.winner == "a"
    assert s.ratio == pytest.approx(1.5)
    assert s.lower is not None and s.lower > 1.4


def test_two_percent_gap_is_not_a_winner() -> None:
    s = separate("c", {"a": T(100, 100.5, 99.5), "b": T(102, 102.5, 101.5)})
    assert s.verdict == "no-clear-winner"
    assert s.winner == "a"  # still the fastest, but not separated


def test_large_but_noisy_gap_fails_the_bootstrap() -> None:
    # medians 100 vs 120 (R = 1.2), but the samples overlap so much that L95(R) < 1
    s = separate("c", {"a": T(60, 100, 200), "b": T(50, 120, 300)})
    assert s.ratio == pytest.approx(1.2)
    assert s.lower is not None and s.lower < 1
    assert s.verdict == "no-clear-winner"


def test_exactly_ten_percent_with_no_noise_is_separated() -> None:
    s = separate("c", {"a": T(100, 100, 100), "b": T(110, 110, 110)})
    assert s.verdict == "separated"


def test_failed_backends_do_not_rank_and_single_is_not_a_winner() -> None:
    s = separate("c", {"a": T(100, 100), "b": T(ok=False), "c": T(50, ok=False)})
    assert s.verdict == "single"
    assert s.cannot_run == ["b", "c"]
    assert separate("c", {"b": T(ok=False)}).verdict == "none"


def test_bootstrap_is_reproducible_and_seeded() -> None:
    fast, slow = (95, 100, 104, 98, 101), (103, 112, 99, 108, 115)
    one = bootstrap_ratio_lower(fast, slow, key="k", seed=3)
    assert one == bootstrap_ratio_lower(fast, slow, key="k", seed=3)
    # the seed matters (with few resamples the lower percentile moves from seed to seed)
    others = {bootstrap_ratio_lower(fast, slow, key="k", seed=s, resamples=40) for s in range(20)}
    assert len(others) > 1


def test_winners_do_not_depend_on_table_order() -> None:
    t1 = {"x": {"a": T(100, 101, 99), "b": T(130, 131, 128)}, "y": {"a": T(100, 103, 97), "b": T(104, 99, 108)}}
    t2 = dict(reversed(list(t1.items())))
    w1, w2 = winners(t1), winners(t2)
    assert [(r.key, r.verdict, r.lower) for r in w1.results] == [(r.key, r.verdict, r.lower) for r in w2.results]
    assert w1.share == 0.5


def test_transfer_known_answer() -> None:
    src = {
        "c1": {"a": T(100, 100, 100), "b": T(200, 200, 200)},  # a separated
        "c2": {"a": T(100, 100, 100), "b": T(150, 150, 150)},  # a separated
        "c3": {"a": T(100, 101, 99), "b": T(101, 100, 102)},  # a fastest, not separated
        "c4": {"f": T(50, 50, 50), "a": T(100, 100, 100)},  # f separated
        "only-src": {"a": T(1, 1, 1)},
    }
    dst = {
        "c1": {"a": T(100, 100, 100), "b": T(300, 300, 300)},  # same winner: cost 1
        "c2": {"a": T(300, 300, 300), "b": T(100, 100, 100)},  # b wins, separated: cost 3
        "c3": {"a": T(120, 120, 120), "b": T(100, 100, 100)},  # b wins (1.2x), separated on dst only: cost 1.2
        "c4": {"f": T(ok=False), "a": T(80, 80, 80)},  # f cannot run on dst
    }
    t = transfer(src, dst)
    assert t.shared == 4
    # c2, c3 and c4 change winner (on c4 the source's pick f does not run, so a wins on the target)
    assert (t.changes_all, t.compared_all) == (3, 4)
    # separated on both: c1 (same) and c2 (changed); c3 is not separated on the source, c4 not on the target
    assert (t.changes_separated, t.compared_separated) == (1, 2)
    assert sorted(c for _, c in t.costs) == pytest.approx([1.0, 1.2, 3.0])
    assert t.cannot_run == [("c4", "f")]
    assert t.median_cost == pytest.approx(1.2)
    assert t.p95_cost == pytest.approx(1.2 + 0.9 * 1.8)


def test_one_sample_each_is_never_a_winner() -> None:
    s = separate("c", {"a": T(100), "b": T(300)})
    assert s.verdict == "no-clear-winner" and s.lower is None and s.ratio == 3.0
