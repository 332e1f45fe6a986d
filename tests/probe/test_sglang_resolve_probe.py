"""The sglang-resolve probe's judge on its recorded grids (no SGLang, no GPU)."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from kbtool.kb import load_kb
from kbtool.probe import engine as engine_probe
from kbtool.probe.judges import sglang_resolve as sg_judge
from kbtool.solve.image import Image
from kbtool.solve.imagebuild import image_of
from probes import sglang_resolve as sg
from tests.util import RECORDS, ROOT

DATA = ROOT / "tests" / "data" / "sglang"
SM80, SM90 = DATA / "0.5.23" / "sm80.json.gz", DATA / "0.5.23" / "sm90.json.gz"
pytestmark = pytest.mark.skipif(not (SM80.exists() and SM90.exists()), reason="no recorded SGLang 0.5.23 grid")
CLAIM = "sglang-trtllm-mha-prefill-arch"  # refuses trtllm_mha prefill outside SM90, SM100, SM120 (0.5.23)


@cache
def image() -> Image:
    return image_of(load_kb(RECORDS)[0])


@cache
def grid_points() -> list[tuple[Any, ...]]:
    return [p for f in (SM80, SM90) for p in sg_judge.points(sg.load(f))]


class _Edited:
    """The image with one SGLang claim's condition replaced (what the judge reads of it)."""

    def __init__(self, cid: str, requires: dict[str, Any]) -> None:
        from pydantic import TypeAdapter

        from kbtool.model.common import Condition
        from kbtool.solve.conditions import compile_condition

        sec = dict(image().engine_data("sglang"))
        claims = dict(sec["claims"])
        when, _req, message, where, scope = claims[cid]
        claims[cid] = (when, compile_condition(TypeAdapter(Condition).validate_python(requires)), message, where,
                       scope)
        self.section = {**sec, "claims": claims}

    def engine_data(self, name: str) -> dict[str, Any]:
        return self.section if name == "sglang" else image().engine_data(name)


def by_claim(img: Any, release: str = "0.5.23") -> dict[str, dict[str, Any]]:
    return {r["claim"]: r for r in sg_judge.judge_grid(img, release, grid_points(), [CLAIM])}


def test_the_recorded_claim_agrees_at_every_point() -> None:
    r = by_claim(image())[CLAIM]
    assert r["refused_ok"] > 0 and not r["ran"] and not r["refused"]
    assert r["platforms"] == ["sm80", "sm90"]


def test_a_claim_that_refuses_too_much_is_contradicted_where_sglang_resolved() -> None:
    only_sm100 = {"all": [{"var": "cc", "ge": 10.0}, {"var": "cc", "lt": 11.0}]}
    r = by_claim(_Edited(CLAIM, only_sm100))[CLAIM]
    assert r["ran"] and {p["platform"] for p in r["ran"]} == {"sm90"}, "SGLang 0.5.23 runs trtllm_mha prefill on SM90"


def test_a_claim_that_allows_too_much_is_contradicted_where_sglang_raised_its_message() -> None:
    any_nvidia = {"var": "vendor", "eq": "nvidia"}
    r = by_claim(_Edited(CLAIM, any_nvidia))[CLAIM]
    assert r["refused"] and {p["platform"] for p in r["refused"]} == {"sm80"}


def test_a_claim_of_another_release_is_judged_there_too() -> None:
    old = "sglang-trtllm-mha-prefill-sm100"  # 0.5.17 runs trtllm_mha prefill on SM100 only
    r = {x["claim"]: x for x in sg_judge.judge_grid(image(), "0.5.23", grid_points(), [old])}[old]
    assert r["ran"] and all(p["platform"] == "sm90" for p in r["ran"]), "0.5.23 accepts it on SM90"


def test_judge_gives_verdicts_in_the_evidence_shape() -> None:
    obs = [{"outcome": "OK", "metrics": {"raw": str(f)}} for f in (SM80, SM90)]
    got = {v["claim"]: v for v in sg.judge(obs, {})}
    assert set(got) == set(sg.SPEC.claims)
    v = got[CLAIM]
    assert v["verdict"] == "confirmed" and v["scope"]["sglang"] == "0.5.23"
    assert v["scope"]["platform"] == ["sm80", "sm90"] and "refused with its message" in v["detail"]
    assert got["sglang-gemma4-backends"]["verdict"] == "inconclusive", "the grid has no Gemma 4 model"


def test_the_probe_names_its_engine() -> None:
    assert not engine_probe.needs_gpu(sg.SPEC) and engine_probe.engine_of(sg.SPEC) == "sglang"
    env = engine_probe.environment({"gpu": None}, python="/nonexistent/python", spec=sg.SPEC)
    assert env["gpu"] == "no GPU (sglang not installed)"
    assert sg_judge.message_pattern("got {attention_backend}, want x").fullmatch("got fa3, want x")


def test_an_argparse_refusal_agrees_on_the_flag_and_value_only() -> None:
    sgl = {"error": "SystemExit", "where": "argparse",
           "message": "sglang serve: error: argument --dsa-decode-backend: invalid choice: 'triton_sparse_mla' "
                      "(choose from 'flashmla_sparse', 'fa3')"}
    from kbtool.errors import UsageError
    from kbtool.solve.engines.sglang.args import parse_argv

    got = sg_judge.outcome(image(), "0.5.23", {}, {}, {sg_judge.REFUSED: "never parsed"})
    assert got["where"] == "argparse" and sg_judge.differs(got, sgl) == ["error"]
    with pytest.raises(UsageError) as refused:
        parse_argv(["--model-path", "m", "--dsa-decode-backend", "triton_sparse_mla"])
    kb = {"error": "SystemExit", "where": "argparse", "message": str(refused.value)}
    assert sg_judge.differs(kb, sgl) == []
    assert sg_judge.differs(kb, {**sgl, "message": sgl["message"].replace("decode", "prefill")}) == ["error"]
