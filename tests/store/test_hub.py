"""`--model ORG/NAME` with no KB record: its config.json from the standard Hugging Face cache (offline, no
huggingface_hub needed), else from the Hub (or the HF_ENDPOINT mirror) through huggingface_hub, into that cache.

The Hub is a small HTTP server on localhost speaking the part of the Hub's protocol hf_hub_download uses (HEAD and
GET of /ORG/NAME/resolve/REV/FILE, X-Repo-Commit, X-Error-Code), so HF_ENDPOINT is what points kb at it."""

from __future__ import annotations

import http.server
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbtool.errors import UsageError
from kbtool.store import hfcache, hub
from tests.util import ROOT, hf_cache, run_kb

CONFIG = ROOT / "probes" / "vllm_boot" / "models" / "qwen3-8b" / "config.json"
SHA = "0123456789abcdef0123456789abcdef01234567"
OFFLINE = {"KB_NO_CACHE": "1", "HF_HUB_OFFLINE": "1"}


class FakeHub(http.server.BaseHTTPRequestHandler):
    """acme/Tiny-8B is public; acme/Gated-8B answers only with the token `hf_secret`; the rest are not found."""

    calls: list[str] = []

    def _answer(self, body: bool) -> None:
        type(self).calls.append(f"{self.command} {self.path}")
        parts = self.path.split("/")  # '', org, name, 'resolve', rev, file
        repo, file = "/".join(parts[1:3]), parts[-1]
        error = None
        if repo not in ("acme/Tiny-8B", "acme/Gated-8B") or len(parts) != 6 or parts[3] != "resolve":
            error = (404, "RepoNotFound")
        elif repo == "acme/Gated-8B" and self.headers.get("Authorization") != "Bearer hf_secret":
            error = (403, "GatedRepo")
        elif file != "config.json":
            error = (404, "EntryNotFound")
        if error:
            self.send_response(error[0])
            self.send_header("X-Error-Code", error[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = CONFIG.read_bytes()
        self.send_response(200)
        self.send_header("X-Repo-Commit", SHA)
        self.send_header("ETag", '"e7a9"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_HEAD(self) -> None:
        self._answer(False)

    def do_GET(self) -> None:
        self._answer(True)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def mirror(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A fake Hub on localhost as HF_ENDPOINT, an empty standard cache, kb online."""
    pytest.importorskip("huggingface_hub")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    FakeHub.calls = []
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("KB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    yield url
    server.shutdown()
    server.server_close()


def test_a_model_in_the_standard_cache_answers_offline_with_its_commit(tmp_path: Path) -> None:
    hf_cache(tmp_path, "acme/Tiny-8B", {"config.json": CONFIG.read_bytes()}, commit=SHA)
    r = run_kb("query", "--gpu", "h100", "--ctx", "32k", "--model", "acme/Tiny-8B", "--json",
               env={**OFFLINE, "HF_HUB_CACHE": str(tmp_path)})
    assert r.code == 0, r.err
    a = json.loads(r.out)
    assert a["query"]["model"] == "tiny-8b" and a["memory"]["kv_bytes_per_token"] == 36 * 8 * 128 * 2 * 2
    assert a["assumed"]["model"] == (f"tiny-8b from acme/Tiny-8B config.json at commit {SHA[:12]}, from the "
                                     f"Hugging Face cache {tmp_path}; weights estimated as parameters x bytes "
                                     "(offline: the Hub's safetensors headers were not read)")


def test_hf_home_locates_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    hf_cache(tmp_path / "hub", "acme/Tiny-8B", {"config.json": b"{}"}, commit=SHA)
    got = hub.find_config("ACME/tiny-8b")  # the Hub's ids are case-insensitive; the cache keeps the typed case
    assert got is not None and (got.repo, got.commit, got.path.parent.name) == ("acme/Tiny-8B", SHA, SHA)


def test_the_cache_is_read_without_huggingface_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # importing it now fails, as where it is absent
    hf_cache(tmp_path, "acme/Tiny-8B", {"config.json": CONFIG.read_bytes()}, commit=SHA)
    r = run_kb("query", "--gpu", "h100", "--model", "acme/Tiny-8B", "--json",
               env={"KB_NO_CACHE": "1", "HF_HUB_CACHE": str(tmp_path)})
    assert r.code == 0, r.err
    r = run_kb("query", "--gpu", "h100", "--model", "acme/Other-8B", env={"KB_NO_CACHE": "1",
                                                                         "HF_HUB_CACHE": str(tmp_path)})
    assert r.code == 2 and "Traceback" not in r.err
    assert r.err == (f"error: --model: 'acme/Other-8B' has no KB record and is not in the Hugging Face cache "
                     f"({tmp_path}); reading it from the Hub needs huggingface_hub\n"
                     f"  fix: pip install 'kbtool[hub]', or `hf download acme/Other-8B config.json` (on a machine "
                     f"with network; copy the cache folder models--acme--Other-8B into {tmp_path}), then ask "
                     "again; or give --model PATH/config.json\n")


def test_a_miss_offline_names_the_cache_and_hf_download(tmp_path: Path) -> None:
    r = run_kb("query", "--gpu", "h100", "--model", "acme-labs/Super-Model-9B",
               env={**OFFLINE, "HF_HUB_CACHE": str(tmp_path)})
    assert r.code == 2
    assert r.err == (f"error: --model: 'acme-labs/Super-Model-9B' has no KB record, is not in the Hugging Face "
                     f"cache ({tmp_path}), and kb is offline (HF_HUB_OFFLINE/KB_OFFLINE)\n"
                     "  fix: `hf download acme-labs/Super-Model-9B config.json` (on a machine with network; copy "
                     f"the cache folder models--acme-labs--Super-Model-9B into {tmp_path}), then ask again; or "
                     "give --model PATH/config.json\n")


def test_a_cache_entry_without_the_ref_is_not_a_hit(tmp_path: Path) -> None:
    hf_cache(tmp_path, "acme/Tiny-8B", {"config.json": b"{}"}, commit=SHA, ref=None)
    assert hfcache.cached_file("acme/Tiny-8B", "config.json", cache=tmp_path) is None
    got = hfcache.cached_file("acme/Tiny-8B", "config.json", revision=SHA, cache=tmp_path)  # a commit needs none
    assert got is not None and got.commit == SHA


def test_the_mirror_is_asked_and_the_file_lands_in_the_standard_cache(mirror: str, tmp_path: Path) -> None:
    got = hub.fetch_config("acme/Tiny-8B")
    assert got.path == tmp_path / "hub" / "models--acme--Tiny-8B" / "snapshots" / SHA / "config.json"
    assert got.text == f"acme/Tiny-8B config.json at commit {SHA[:12]}, from {mirror}"
    assert got.url == f"{mirror}/acme/Tiny-8B/blob/{SHA}/config.json"
    assert "HEAD /acme/Tiny-8B/resolve/main/config.json" in FakeHub.calls
    n = len(FakeHub.calls)
    assert (tmp_path / "hub" / "models--acme--Tiny-8B" / "refs" / "main").read_text() == SHA
    again = hub.fetch_config("acme/Tiny-8B")  # now a cache hit: no request
    assert (again.path, again.commit) == (got.path, SHA) and again.via.startswith("the Hugging Face cache")
    assert len(FakeHub.calls) == n


def test_an_unreachable_hub_fails_at_once_without_retries(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    """hf_hub_download alone, with nothing cached, retries an unreachable Hub five times (23 s of backoff) and logs
    each try on stderr; kb asks once for the revision's commit and says what failed."""
    pytest.importorskip("huggingface_hub")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("KB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    start = time.monotonic()
    with pytest.raises(UsageError) as e:
        hub.fetch_config("acme/Tiny-8B")
    assert time.monotonic() - start < 10  # the backoff alone sleeps 23 s
    assert f"is not in the Hugging Face cache ({tmp_path}), and {url} could not be reached (" in e.value.args[0]
    assert "Retry" not in capfd.readouterr().err


def test_a_gated_model_says_so_and_a_token_opens_it(mirror: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError) as e:
        hub.fetch_config("acme/Gated-8B")
    assert e.value.args[0] == (f"--model: 'acme/Gated-8B' has no KB record, is not in the Hugging Face cache "
                            f"({hfcache.hub_cache()}), and is gated on {mirror}: accept its terms on the model "
                            "page, then set HF_TOKEN or run `hf auth login`")
    assert (e.value.fix or "").startswith("`hf download acme/Gated-8B config.json`")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert hub.fetch_config("acme/Gated-8B").commit == SHA


def test_a_repository_the_hub_does_not_have(mirror: str) -> None:
    with pytest.raises(UsageError) as e:
        hub.fetch_config("acme/Nothing-1B")
    assert e.value.args[0].endswith(f"and was not found on {mirror} (or it is private: set HF_TOKEN)")
    assert not list((hfcache.hub_cache()).glob("models--acme--Nothing-1B/snapshots/*/config.json"))


def test_the_cache_reader_agrees_with_huggingface_hubs_own(tmp_path: Path) -> None:
    """hfcache.cached_file answers as huggingface_hub's try_to_load_from_cache does, for a hit, a miss, a ref."""
    hh = pytest.importorskip("huggingface_hub")
    hf_cache(tmp_path, "acme/Tiny-8B", {"config.json": b"{}"}, commit=SHA)
    for repo, file, rev in (("acme/Tiny-8B", "config.json", None), ("acme/Tiny-8B", "config.json", SHA),
                            ("acme/Tiny-8B", "tokenizer.json", None), ("acme/Other-8B", "config.json", None),
                            ("acme/Tiny-8B", "config.json", "v2")):
        ours = hfcache.cached_file(repo, file, revision=rev, cache=tmp_path)
        theirs = hh.try_to_load_from_cache(repo, file, cache_dir=tmp_path, revision=rev)
        assert (str(ours.path) if ours else None) == (theirs if isinstance(theirs, str) else None), (repo, file, rev)


@pytest.mark.parametrize("token", ["hf_abc\r\nX-Evil: 1", "hf_a b", "hf_\x1b]0;x"])
def test_a_token_with_a_line_break_is_refused_not_sent(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    """Issue 48: HF_TOKEN holding CR/LF ended in ValueError from the HTTP header check, uncaught (exit 3)."""
    hh = pytest.importorskip("huggingface_hub")
    monkeypatch.delenv("KB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_TOKEN", token)
    sent: list[object] = []
    monkeypatch.setattr(hh, "hf_hub_download", lambda *a, **k: sent.append(a))
    with pytest.raises(UsageError) as e:
        hub.fetch_config("acme/Never-8B")
    assert str(e.value) == ("HF_TOKEN holds a line break, space or control character; it was not sent\n"
                            "  fix: set HF_TOKEN to the token alone (hf_...), without quotes or newlines")
    assert sent == []
