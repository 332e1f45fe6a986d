"""kbtool/solve/request.py: a pasted serve line that the newest recorded parser refuses is answered for the newest
release whose recorded parser has the refused flag as its own option (read_line), and only then."""

from __future__ import annotations

import json

import pytest

from kbtool.errors import UsageError
from kbtool.solve.engines import registry as engines
from kbtool.solve.engines.flags import table, table_releases
from kbtool.solve.request import build_query, read_line
from tests.util import DATA

SGLANG_LINE = "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --cuda-graph-max-bs 256 --tp-size 1"


def own_options(engine: str, release: str) -> set[str]:
    return set(json.loads((DATA / engine / release / "flags.json").read_text(encoding="utf-8"))["flags"])


def test_a_flag_the_newest_parser_split_is_read_with_the_release_that_has_it() -> None:
    """sglang#9704: --cuda-graph-max-bs is an option of the recorded 0.5.17 parser and an ambiguous prefix in
    0.5.23's (split into -decode and -prefill): the line is answered for 0.5.17 and the assumed line says why."""
    newest = table_releases("sglang")[0]
    assert "--cuda-graph-max-bs" not in own_options("sglang", newest)
    has = [r for r in table_releases("sglang")[1:] if "--cuda-graph-max-bs" in own_options("sglang", r)]
    q = build_query(sglang_args=SGLANG_LINE, gpu="h100")
    assert q.release == has[0] and q.line_read_with == has[0]
    assert q.release_note is not None and q.release_note.startswith(f"{has[0]} (the newest release whose recorded")
    assert f"SGLang {newest}'s refuses it: ambiguous option: --cuda-graph-max-bs" in q.release_note


def test_a_release_asked_for_keeps_its_refusal() -> None:
    newest = table_releases("sglang")[0]
    with pytest.raises(UsageError, match="ambiguous option: --cuda-graph-max-bs"):
        build_query(sglang_args=SGLANG_LINE, sglang=newest)


def test_a_prefix_an_older_parser_would_only_guess_at_is_not_enough() -> None:
    """vllm#15042's --device: older vLLM parsers take it as a unique prefix of --device-ids, a different option;
    no recorded parser has --device itself, so the newest release's refusal stands."""
    def takes(rel: str) -> bool:
        try:
            return table("vllm", "--vllm-args", rel).canonical("--device") is not None
        except UsageError:
            return False

    assert any(takes(r) for r in table_releases("vllm")[1:])  # the case guarded: an older parser takes the prefix
    assert not any("--device" in own_options("vllm", r) for r in table_releases("vllm"))
    with pytest.raises(UsageError, match="ambiguous option: --device could match"):
        build_query(vllm_args="vllm serve Qwen/Qwen3-8B --device cuda", gpu="h100")


def test_an_unknown_flag_an_older_parser_has_moves_the_release() -> None:
    """A flag only an older recorded parser has (found in the recorded tables, not assumed) picks that release."""
    rels = table_releases("vllm")
    newest = own_options("vllm", rels[0])
    pick = next(((r, f) for r in rels[1:] for f in sorted(own_options("vllm", r) - newest)
                 if f.startswith("--") and table("vllm", "--vllm-args", r).spec(f)["kind"] == "switch"), None)
    assert pick is not None
    rel, flag = pick
    line, note = read_line(engines.ENGINES["vllm"], f"vllm serve Qwen/Qwen3-8B {flag}", None)
    assert line.read_with == rel and line.refused == () and note is not None and flag in note
    same, none = read_line(engines.ENGINES["vllm"], "vllm serve Qwen/Qwen3-8B --no-such-flag-anywhere", None)
    assert none is None and same.read_with == rels[0] and same.refused == ("--no-such-flag-anywhere",)
