"""An SGLang release kb has no resolution for (kbtool/solve/engines/sglang/unrecorded.py): answered conditional by
the recorded releases around it, each with its own resolution and pool as kb answers that release when asked for it,
and the sweep that records it; never with a selection, page size or pool of its own. A value that is not a release
number stays a usage error naming the recorded releases."""

from __future__ import annotations

import json

import pytest

from kbtool.query_cli import image, main
from kbtool.render.verdict import answer_summary
from kbtool.solve.conditions import compare_versions
from kbtool.solve.engines.sglang import resolve as sglang_resolve
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve


@pytest.fixture(scope="module")
def img():  # type: ignore[no-untyped-def]
    return image()


def _ask(img, **kw):  # type: ignore[no-untyped-def]
    return solve(img, build_query(**kw))


def _own(img, release: str, **kw) -> str:  # type: ignore[no-untyped-def]
    """What kb answers for a recorded release, in the words the unrecorded answer uses for it."""
    a = _ask(img, sglang=release, **kw)
    e = a.engine
    assert e["state"] == "selected", e
    pick = f"selects {e['decode']}" if e["prefill"] == e["decode"] else \
        f"selects prefill {e['prefill']}, decode {e['decode']}"
    tokens = a.memory.engine_report["max_total_num_tokens"]
    return f"{pick}, page size {e['page_size']}; pool {tokens:,} tokens"


def _unrecorded_between(known: list[str]) -> str:
    """A release number between the two oldest recorded ones that the KB does not record."""
    below, above = known[0], known[1]
    got = f"{below}.post1"
    assert compare_versions(below, got) < 0 < compare_versions(above, got) and got not in known
    return got


QUERY = {"gpu": "b200", "model": "deepseek-v3", "gpus": 8, "engine": "sglang"}


def test_older_than_every_recorded_release(img) -> None:  # type: ignore[no-untyped-def]
    known = sglang_resolve.releases(img)
    old = "0.4.6"
    assert compare_versions(old, known[0]) < 0
    a = _ask(img, **{**QUERY, "sglang": old})
    assert a.verdict == "conditional" and a.engine["state"] == "not_recorded" and a.engine["release"] == old
    assert a.engine["between"] == f"before the oldest recorded release {known[0]} ({_own(img, known[0], **QUERY)}):" \
                                  " not swept"
    assert answer_summary(a).endswith(f"SGLang {old} is not recorded; {a.engine['between']}")


def test_newer_than_every_recorded_release(img) -> None:  # type: ignore[no-untyped-def]
    known = sglang_resolve.releases(img)
    new = known[-1].rsplit(".", 1)[0] + "." + str(int(known[-1].rsplit(".", 1)[1]) + 1)
    a = _ask(img, **{**QUERY, "sglang": new})
    assert a.verdict == "conditional" and a.engine["state"] == "not_recorded"
    assert a.engine["between"] == f"after the newest recorded release {known[-1]} " \
                                  f"({_own(img, known[-1], **QUERY)}): not swept"


def test_between_two_recorded_releases_names_each_ones_own(img) -> None:  # type: ignore[no-untyped-def]
    known = sglang_resolve.releases(img)
    mid = _unrecorded_between(known)
    lo, hi = _own(img, known[0], **QUERY), _own(img, known[1], **QUERY)
    a = _ask(img, **{**QUERY, "sglang": mid})
    assert a.verdict == "conditional" and a.engine["state"] == "not_recorded"
    want = f"between {known[0]} and {known[1]} (each {lo}): not swept" if lo == hi else \
        f"between {known[0]} ({lo}) and {known[1]} ({hi}): not swept"
    assert a.engine["between"] == want
    assert lo != hi  # this query's pool differs between the two: each release's own is named


def test_neighbours_that_agree_are_named_once(img) -> None:  # type: ignore[no-untyped-def]
    known = sglang_resolve.releases(img)
    q = {"gpu": "h100", "model": "llama-3.1-8b", "ctx": "32k", "engine": "sglang"}
    lo, hi = _own(img, known[0], **q), _own(img, known[1], **q)
    a = _ask(img, **q, sglang=_unrecorded_between(known))
    assert lo == hi and a.engine["between"] == f"between {known[0]} and {known[1]} (each {lo}): not swept"


def test_nothing_of_its_own_is_stated(img) -> None:  # type: ignore[no-untyped-def]
    a = _ask(img, **{**QUERY, "sglang": "0.4.6"})
    e = a.engine
    assert (e["selected"], e["prefill"], e["decode"], e["page_size"], e["kv_cache_dtype"]) == (None,) * 5
    assert a.memory is None and any("SGLang 0.4.6 is not recorded: its pool is not sized" in n for n in a.notes)
    judged = [b for b in a.backends if b.id.startswith("sglang-") and b.status != "rejected"]
    assert judged and all(b.status == "unknown" for b in judged)  # no backend said to start under it
    assert all(r.code == "NOT_RECORDED" for b in judged for r in b.reasons if r.layer == "engine")


def test_a_resolution_error_of_a_neighbour_is_named_as_its_own(img) -> None:  # type: ignore[no-untyped-def]
    known = sglang_resolve.releases(img)
    q = {"gpu": "h100", "model": "deepseek-v3", "gpus": 8, "sglang_args": "--attention-backend trtllm_mla"}
    own = _ask(img, **q, sglang=known[0])
    assert own.engine["state"] == "error"
    a = _ask(img, **q, sglang="0.4.6")
    assert a.verdict == "conditional"
    assert a.engine["between"] == f"before the oldest recorded release {known[0]} (refuses: " \
                                  f"{own.engine['error_type']}: {own.engine['error']}): not swept"


@pytest.mark.parametrize("value", ["latest", "0.5.x", "5", "0.5.23-nightly!"])
def test_a_value_that_is_not_a_release_is_a_usage_error(img, value: str, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--gpu", "h100", "--engine", "sglang", "--sglang", value]) == 2
    err = capsys.readouterr().err
    assert f"--sglang {value}: not a release number" in err
    assert ", ".join(sglang_resolve.releases(img)) in err and "\n  fix: e.g. --sglang " in err


def test_json_carries_it_with_the_sweep_that_records_it(capsys) -> None:  # type: ignore[no-untyped-def]
    rc = main(["--gpu", "h100", "--model", "llama-3.1-8b", "--engine", "sglang", "--sglang", "0.5.9", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    e = out["engine"]
    assert out["verdict"] == "conditional" and e["state"] == "not_recorded" and e["release"] == "0.5.9"
    assert e["between"].startswith("before the oldest recorded release ") and e["between"].endswith(": not swept")
    assert e["source"] == "run `kb probe sweep --lib sglang --releases 0.5.9` to record it"
    assert out["memory"] is None


def test_the_text_answer_shows_the_fix(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--gpu", "h100", "--model", "llama-3.1-8b", "--engine", "sglang", "--sglang", "0.4.6"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "verdict: conditional" in out and "SGLang 0.4.6 is not recorded; before the oldest recorded release" in out
    assert "run `kb probe sweep --lib sglang --releases 0.4.6` to record it" in out
    # its backends are not resolved: the per-phase lines say why none is known to pass
    assert "use for prefill: no kernel is known to pass (SGLang 0.4.6 is not recorded: below)" in out


def test_lib_pin_of_an_unrecorded_release(img) -> None:  # type: ignore[no-untyped-def]
    a = _ask(img, gpu="h100", model="llama-3.1-8b", engine="sglang", lib=["sglang=0.4.6"])
    assert a.engine["state"] == "not_recorded" and a.engine["release"] == "0.4.6"


def test_every_accelerator_row_says_it_is_not_recorded(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--model", "llama-3.1-8b", "--engine", "sglang", "--sglang", "0.4.6"]) == 0
    out = capsys.readouterr().out
    n = int(out.split(" accelerators:", 1)[0])
    assert n > 1 and " ".join(out.split()).count("conditional SGLang 0.4.6 not recorded; ") == n
