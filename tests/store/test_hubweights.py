"""kbtool/store/hubweights.py: a checkpoint's tensor bytes from its safetensors headers on the Hub, read with ranged
requests, never the tensors; and the query that uses them.

The Hub is a small HTTP server on localhost (HF_ENDPOINT) holding one repository, acme/Tiny-8B, at one commit: its
config.json, its model.safetensors.index.json and two shards. The shards are synthetic (written by the test in the
safetensors layout, with GPTQ's packed tensor names; see tests/store/test_checkpoint.py), so the expected bytes are
known; the server answers `Range: bytes=A-B` with 206 and Content-Range, as the Hub's file servers do, and records
every request so the test can see that only the headers were asked for.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbtool.store import hubweights
from kbtool.store.untrusted import UntrustedInputError
from tests.store.test_checkpoint import gptq_layer, vllm_rope, write_shard
from tests.util import ROOT, hf_cache, run_kb

CONFIG = ROOT / "probes" / "vllm_boot" / "models" / "qwen3-8b" / "config.json"
SHA = "89abcdef0123456789abcdef0123456789abcdef"
A, B = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


class Hub(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    calls: list[tuple[str, str, str | None]] = []
    token: str | None = None  # a gated repository: only this bearer token is answered
    ranges = True  # False: a server that ignores Range and sends the whole file

    def _answer(self, body: bool) -> None:
        type(self).calls.append((self.command, self.path, self.headers.get("Range")))
        parts = self.path.split("/")  # '', org, name, 'resolve', rev, file
        name = parts[-1]
        if self.token and self.headers.get("Authorization") != f"Bearer {self.token}":
            self._error(401, "GatedRepo")
            return
        if "/".join(parts[1:3]) != "acme/Tiny-8B" or len(parts) != 6 or name not in self.files:
            self._error(404, "EntryNotFound" if "/".join(parts[1:3]) == "acme/Tiny-8B" else "RepoNotFound")
            return
        data = self.files[name]
        rng = self.headers.get("Range")
        code, chunk = 200, data
        if rng and self.ranges and self.command == "GET":
            first, last = (int(x) for x in rng.removeprefix("bytes=").split("-"))
            chunk, code = data[first:last + 1], 206
        self.send_response(code)
        self.send_header("X-Repo-Commit", SHA)
        self.send_header("ETag", f'"{len(data)}"')
        if code == 206:
            self.send_header("Content-Range", f"bytes {first}-{first + len(chunk) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(chunk)))
        self.end_headers()
        if body:
            self.wfile.write(chunk)

    def _error(self, code: int, what: str) -> None:
        self.send_response(code)
        self.send_header("X-Error-Code", what)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        self._answer(False)

    def do_GET(self) -> None:
        self._answer(True)

    def log_message(self, *args: object) -> None:
        pass


def _shards(tmp: Path) -> int:
    """Two shards of a GPTQ checkpoint with an MTP layer kb must not count; their counted data bytes."""
    a = write_shard(tmp / A, {**gptq_layer("model.layers.0.mlp.up_proj", 4096, 12288),
                              "model.embed_tokens.weight": ("F16", [151936, 4096])})
    write_shard(tmp / B, {"lm_head.weight": ("F16", [151936, 4096]),
                          "model.layers.36.mlp.up_proj.qweight": ("I32", [512, 12288])})  # the MTP layer (36)
    return a + 151936 * 4096 * 2


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[str, int]]:
    pytest.importorskip("huggingface_hub")
    want = _shards(tmp_path)
    config = {**json.loads(CONFIG.read_text()), "num_nextn_predict_layers": 1}
    index = {"metadata": {}, "weight_map": {"model.embed_tokens.weight": A, "model.layers.0.mlp.up_proj.qweight": A,
                                            "lm_head.weight": B, "model.layers.36.mlp.up_proj.qweight": B}}
    Hub.files = {"config.json": json.dumps(config).encode(), "model.safetensors.index.json": json.dumps(index).encode(),
                 A: (tmp_path / A).read_bytes(), B: (tmp_path / B).read_bytes()}
    Hub.calls, Hub.token, Hub.ranges = [], None, True
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "kb-cache"))
    for k in ("KB_OFFLINE", "HF_HUB_OFFLINE", "KB_NO_CACHE", "HF_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    yield url, want
    server.shutdown()
    server.server_close()


def _config() -> dict[str, object]:
    return json.loads(Hub.files["config.json"])


def test_the_headers_are_read_with_two_ranged_requests_per_shard(hub: tuple[str, int]) -> None:
    url, want = hub
    got, why = hubweights.hub_tensor_bytes("acme/Tiny-8B", SHA, _config())
    assert why == "" and got is not None
    assert got.total == want and got.files == [A, B]
    assert got.skipped == {"MTP layers": 512 * 12288 * 4}
    assert got.by_dtype == {"I32": 4096 // 8 * 12288 * 4 + 4096 // 128 * 12288 // 8 * 4 + 4096 * 4,
                            "F16": 4096 // 128 * 12288 * 2 + 2 * 151936 * 4096 * 2}
    ranged = sorted((p.rsplit("/", 1)[1], r) for c, p, r in Hub.calls if p.endswith(".safetensors"))
    for f in (A, B):
        n = int.from_bytes(Hub.files[f][:8], "little")
        assert [r for name, r in ranged if name == f] == ["bytes=0-7", f"bytes=8-{8 + n - 1}"]
    assert f"read from {url} at commit {SHA[:12]}" in got.text and "not loaded: MTP layers" in got.text


def test_what_was_read_once_answers_offline(hub: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    first, _ = hubweights.hub_tensor_bytes("acme/Tiny-8B", SHA, _config())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    Hub.calls = []
    again, why = hubweights.hub_tensor_bytes("acme/Tiny-8B", SHA, _config())
    assert why == "" and again is not None and again.by_dtype == first.by_dtype and Hub.calls == []  # type: ignore[union-attr]
    assert hubweights.hub_tensor_bytes("acme/Tiny-8B", "0" * 40, _config()) == (
        None, "offline: the Hub's safetensors headers were not read")


def test_a_server_that_ignores_range_is_read_only_as_far_as_the_header(hub: tuple[str, int]) -> None:
    Hub.ranges = False
    got, why = hubweights.hub_tensor_bytes("acme/Tiny-8B", SHA, _config())
    assert why == "" and got is not None and got.total == hub[1]


def test_a_gated_checkpoint_falls_back_and_says_why(hub: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    Hub.token = "hf_secret"
    got, why = hubweights.hub_tensor_bytes("acme/Tiny-8B", SHA, _config())
    assert got is None and why == f"the safetensors headers could not be read from {hub[0]}: gated (set HF_TOKEN, " \
                                   "or `hf auth login`)"
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    got, why = hubweights.hub_tensor_bytes("acme/Tiny-8B", SHA, _config())
    assert why == "" and got is not None and got.total == hub[1]


def test_a_header_that_claims_more_than_its_file_is_refused(hub: tuple[str, int]) -> None:
    Hub.files[B] = (10**9).to_bytes(8, "little") + b"{}"
    with pytest.raises(UntrustedInputError, match="declares a 1,000,000,000-byte header"):
        hubweights.hub_tensor_bytes("acme/Tiny-8B", SHA, _config())


def test_the_query_sizes_a_hub_model_from_its_headers(hub: tuple[str, int], tmp_path: Path) -> None:
    url, want = hub
    r = run_kb("query", "--gpu", "h100", "--ctx", "32k", "--model", "acme/Tiny-8B", "--json",
               env={"KB_NO_CACHE": "1"})
    assert r.code == 0, r.err
    a = json.loads(r.out)
    assert a["memory"]["weights_bytes"] == want + vllm_rope(_config())  # + the rope caches vLLM's load builds
    said = a["assumed"]["model"]
    assert said.startswith(f"tiny-8b from acme/Tiny-8B config.json at commit {SHA[:12]}, from {url}; weights "
                           f"{want / 1e9:,.1f} GB ({want:,} B) from the safetensors headers of 2 files read from {url}")
    assert said.endswith(f"; not loaded: MTP layers {512 * 12288 * 4:,} B")


def test_a_config_in_the_cache_with_no_shards_reads_the_headers_from_the_hub(hub: tuple[str, int],
                                                                            tmp_path: Path) -> None:
    hf_cache(tmp_path / "hub", "acme/Tiny-8B", {"config.json": Hub.files["config.json"]}, commit=SHA)
    r = run_kb("query", "--gpu", "h100", "--model", "acme/Tiny-8B", "--json", env={"KB_NO_CACHE": "1"})
    assert r.code == 0, r.err
    assert json.loads(r.out)["memory"]["weights_bytes"] == hub[1] + vllm_rope(_config())
