"""`--model ORG/NAME` with no KB record: the config.json comes from the Hub once, then from the cache."""

from __future__ import annotations

import io
import json
import urllib.error
from pathlib import Path

import pytest

from kbtool.errors import UsageError
from kbtool.store import hub
from tests.util import ROOT, run_kb

CONFIG = ROOT / "probes" / "vllm_boot" / "models" / "qwen3-8b" / "config.json"
SHA = "0123456789abcdef0123456789abcdef01234567"


def fake_hub(calls: list[str], gated: bool = False):
    def get(url: str) -> bytes:
        calls.append(url)
        if gated:
            raise urllib.error.HTTPError(url, 403, "gated", {}, io.BytesIO())  # type: ignore[arg-type]
        if url.endswith("/api/models/acme/Tiny-8B"):
            return json.dumps({"sha": SHA}).encode()
        if url.endswith(f"/resolve/{SHA}/config.json"):
            return CONFIG.read_bytes()
        raise urllib.error.HTTPError(url, 404, "not found", {}, io.BytesIO())  # type: ignore[arg-type]
    return get


def test_a_config_is_fetched_at_its_commit_and_then_read_from_the_cache(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setenv("KB_HF_CACHE", str(tmp_path))
    monkeypatch.delenv("KB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "_get", fake_hub(calls))
    folder = hub.fetch_config("acme/Tiny-8B")
    assert json.loads((folder / "config.json").read_text()) == json.loads(CONFIG.read_text())
    assert f"commit: {SHA}" in (folder / "SOURCE.yaml").read_text()
    assert not (folder / "hf_quant_config.json").exists()  # the Hub answered 404 for it
    n = len(calls)
    assert hub.fetch_config("acme/Tiny-8B") == folder and len(calls) == n  # cached: no second request
    r = run_kb("query", "--gpu", "h100", "--ctx", "32k", "--model", "acme/Tiny-8B", "--json",
               env={"KB_NO_CACHE": "1", "KB_OFFLINE": "1"})
    assert r.code == 0, r.err
    a = json.loads(r.out)
    assert a["query"]["model"] == "tiny-8b" and a["memory"]["kv_bytes_per_token"] == 36 * 8 * 128 * 2 * 2


def test_a_gated_model_says_so_and_how_to_give_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_HF_CACHE", str(tmp_path))
    monkeypatch.delenv("KB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "_get", fake_hub([], gated=True))
    with pytest.raises(UsageError) as e:
        hub.fetch_config("acme/Tiny-8B")
    assert "gated" in str(e.value) and "huggingface-cli download acme/Tiny-8B" in (e.value.fix or "")
    assert not any(tmp_path.iterdir())  # nothing half-written is left to be read as a config later


@pytest.mark.parametrize("token", ["hf_abc\r\nX-Evil: 1", "hf_a b", "hf_\x1b]0;x"])
def test_a_token_with_a_line_break_is_refused_not_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      token: str) -> None:
    """Issue 48: HF_TOKEN holding CR/LF ended in ValueError from the HTTP header check, uncaught (exit 3)."""
    monkeypatch.setenv("KB_HF_CACHE", str(tmp_path))
    monkeypatch.delenv("KB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_TOKEN", token)
    sent: list[object] = []
    monkeypatch.setattr(hub.urllib.request, "urlopen", lambda *a, **k: sent.append(a))
    with pytest.raises(UsageError) as e:
        hub.fetch_config("acme/Tiny-8B")
    assert str(e.value) == ("HF_TOKEN holds a line break, space or control character; it was not sent\n"
                            "  fix: set HF_TOKEN to the token alone (hf_...), without quotes or newlines")
    assert sent == [] and not any(tmp_path.iterdir())


def test_a_token_with_a_trailing_newline_is_sent_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_abc\n")
    seen: list[str] = []

    class Resp(io.BytesIO):
        def __enter__(self) -> Resp:
            return self

        def __exit__(self, *a: object) -> None:
            pass

    def urlopen(req: urllib.request.Request, timeout: float) -> Resp:
        seen.append(str(req.get_header("Authorization")))
        return Resp(b"{}")

    monkeypatch.setattr(hub.urllib.request, "urlopen", urlopen)
    assert hub._get("https://huggingface.co/api/models/a/b") == b"{}"
    assert seen == ["Bearer hf_abc"]
