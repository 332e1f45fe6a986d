"""kbtool/solve/installs.py: the overrides a release's evidence was installed with, read from its text."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbtool.solve import installs


def test_overrides_keep_a_plain_scalar_that_ends_in_a_quote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain YAML scalar may end in a quote of its own (SGLang's cuda-tile marker); only a quoted scalar loses its
    quotes. Before, every trailing quote was stripped: "cuda-tile ; sys_platform == 'never"."""
    import kbtool.paths

    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "2026-12-06-no-gpu-sglang-0-5-22-sglang-pool.yaml").write_text(
        "environment:\n  install_overrides:\n  - cuda-tile ; sys_platform == 'never'\n  - 'a==1'\n  - \"b==2\"\n"
        "started: x\n")
    monkeypatch.setattr(kbtool.paths, "records_dir", lambda: tmp_path)
    installs.forget()
    try:
        assert installs.evidence_id("sglang", "0.5.22", "sglang-pool") == "2026-12-06-no-gpu-sglang-0-5-22-sglang-pool"
        assert installs.install_overrides("2026-12-06-no-gpu-sglang-0-5-22-sglang-pool") == (
            "cuda-tile ; sys_platform == 'never'", "a==1", "b==2")
        assert installs.override_note("sglang", "0.5.22", "sglang-pool").startswith(", installed with override cuda")
        assert installs.override_note("sglang", "0.5.23", "sglang-pool") == ""
        assert installs.override_note("sglang", None, "sglang-pool") == ""
    finally:
        installs.forget()
