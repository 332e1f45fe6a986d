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
    parser.addoption("--install", action="store_true", help="run the tests marked install (a wheel built and "
                     "installed in a new venv, pre-commit's hook environment; .ci/run runs them once)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--full-grid"):
        skip_grid = pytest.mark.skip(reason="the whole grid runs with --full-grid (the default run samples it)")
        for item in items:
            if "full_grid" in item.keywords:
                item.add_marker(skip_grid)
    if not config.getoption("--install"):
        skip_install = pytest.mark.skip(reason="builds and installs kb: runs with --install (.ci/run runs them)")
        for item in items:
            if "install" in item.keywords:
                item.add_marker(skip_install)
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shipped_verdicts() -> None:
    """The session's verdict cache holds today's verdicts on the shipped evidence. A test that validates, applies
    or checks a copy of the shipped tree then judges only what it changed. The xdist workers share the work: each
    takes the evidence records no other worker holds (one lock file per record, the costliest probes first),
    judges those the cache lacks, then waits on the locks of the rest. The cache is keyed by content
    (kbtool.probe.verdict_cache), so the answers are the ones a cold `kb validate` gives."""
    import fcntl

    from kbtool.kb import load_kb
    from kbtool.model import Evidence
    from kbtool.probe.judged import Rejudged

    base = os.environ.get("KB_CACHE_DIR")
    if not base or os.environ.get("KB_NO_CACHE"):
        return
    kb, _ = load_kb(Path(__file__).resolve().parent.parent / "records")
    judged = Rejudged(kb)
    first = ("sglang-resolve", "vllm-selector", "vllm-rocm-selector")  # whole recorded grids: the costliest
    todo = sorted((e for e in kb if isinstance(e, Evidence)),
                  key=lambda e: (first.index(e.probe.id) if e.probe.id in first else len(first), e.id))
    locks = Path(base) / "shipped-verdicts"
    locks.mkdir(parents=True, exist_ok=True)
    held = []
    for ev in todo:
        lock = open(locks / f"{ev.id}.lock", "w")  # noqa: SIM115  (closed below, once judged or waited on)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(lock)  # another worker is judging it
            continue
        judged.verdicts(ev)  # from the cache, or judged and stored
        lock.close()
    for lock in held:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.close()


@pytest.fixture(autouse=True)
def _empty_hf_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never read the machine's own Hugging Face cache (kbtool/store/hfcache.py): an empty one stands in."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path_factory.getbasetemp() / "hf-cache-empty"))
    for k in ("HF_HOME", "HF_ENDPOINT", "HF_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(k, raising=False)


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
