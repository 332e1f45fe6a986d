from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

# kb's caches (query image, parsed files, re-judged verdicts) go to the checkout's .pytest_cache, not the user's:
# content-addressed, shared by xdist workers, kept between runs. A test that checks caching sets its own.
os.environ.setdefault("KB_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "kb"))


def _has_gpu() -> bool:
    try:
        import torch
    except Exception:
        return False
    return bool(torch.cuda.is_available())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full-grid", action="store_true", help="run the tests marked full_grid (the whole recorded "
                     "vLLM grids; .ci/run runs them once)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--full-grid"):
        skip_grid = pytest.mark.skip(reason="the whole grid runs with --full-grid (the default run samples it)")
        for item in items:
            if "full_grid" in item.keywords:
                item.add_marker(skip_grid)
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shipped_verdicts() -> None:
    """The session's verdict cache holds today's verdicts on the shipped evidence (one `kb validate` of the shipped
    records). A test that validates, applies or checks a copy of the shipped tree then judges only what it changed;
    with xdist one worker judges while another that asks waits on the lock and finds it done. The cache is keyed
    by content (kbtool.probe.verdict_cache), so the answers are the ones a cold run gives."""
    import fcntl
    import subprocess
    import sys

    base = os.environ.get("KB_CACHE_DIR")
    if not base or os.environ.get("KB_NO_CACHE"):
        return
    root = Path(__file__).resolve().parent.parent
    Path(base).mkdir(parents=True, exist_ok=True)
    with open(Path(base) / "shipped-verdicts.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "-m", "kbtool", "validate", "--kb", str(root / "records")], cwd=root,
                       capture_output=True, timeout=1800, check=False)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach the network."""

    real = socket.socket.connect

    def guard(self: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else None
        if host is None or host in ("127.0.0.1", "localhost", "::1"):
            return real(self, address)  # type: ignore[arg-type]
        raise RuntimeError(f"network access in a test: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", guard)
