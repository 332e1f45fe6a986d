from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import helpers as h


def test_plots_are_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from kbtool.bench.plots import draw

    rows = []
    for b in (1, 32):
        for n in (512, 16384):
            rows.append((h.decode(b, n), "sdpa-flash", [10.0 * b + n / 100, 10.0 * b + n / 100 + 1]))
            rows.append((h.decode(b, n), "flashinfer-decode", [8.0 * b + n / 50, 8.0 * b + n / 50 + 1]))
    rows.append((h.prefill(4, 256), "sdpa-cudnn", [36.0, 36.5]))
    rows.append((h.prefill(4, 8192), "sdpa-cudnn", [3600.0, 3610.0]))
    rows.append((h.prefill(4, 256), "triton", "UNSUPPORTED"))
    from kbtool.measure.table import cases

    paths = draw(cases(h.build("nvidia-h200-sxm", rows)), tmp_path, "x-bench")
    assert sorted(p.name for p in paths) == ["x-bench-decode-fastest-map.png", "x-bench-decode-latency-bandwidth.png",
                                             "x-bench-prefill-latency.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
