"""Three-valued conditions: leaves, Kleene logic, residuals, versions."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from kbtool.model.common import Condition
from kbtool.solve.conditions import (
    allowed_values,
    compare_versions,
    compile_condition,
    describe,
    evaluate,
    false_leaves,
    passes_or_not_applies,
    residual,
    unknown_vars,
    version_key,
)

C: TypeAdapter[Any] = TypeAdapter(Condition)


def cond(data: dict[str, Any]) -> Any:
    """A condition as records hold it, validated, then compiled to the solver's tuple form."""
    return compile_condition(C.validate_python(data))


@pytest.mark.parametrize(("leaf", "env", "want"), [
    ({"var": "head_dim", "le": 256}, {"head_dim": 256}, True),
    ({"var": "head_dim", "le": 256}, {"head_dim": 320}, False),
    ({"var": "head_dim", "le": 256}, {}, None),
    ({"var": "head_dim", "multiple_of": 8}, {"head_dim": 100}, False),
    ({"var": "head_dim", "in": [64, 128]}, {"head_dim": 128}, True),
    ({"var": "kv_dtype", "not_in": ["fp8_e4m3"]}, {"kv_dtype": "fp8_e4m3"}, False),
    ({"var": "sm", "eq": "sm90"}, {"sm": "SM90"}, True),
    ({"var": "cc", "ge": 8.0}, {"cc": 9.0}, True),
    ({"var": "cc", "lt": 11.0}, {"cc": 12.0}, False),
    ({"var": "cuda", "ge": "12.3"}, {"cuda": "12.10"}, True),
    ({"var": "cuda", "ge": "12.3"}, {"cuda": "12.2.1"}, False),
    ({"var": "flashmla", "ge": "2026.09.30"}, {"flashmla": "2026.10.01"}, True),
    ({"var": "causal", "eq": True}, {"causal": True}, True),
    ({"var": "causal", "eq": True}, {"causal": 1}, False),
    ({"var": "ctx", "ge": 65536}, {"ctx": 131072}, True),
])
def test_leaf(leaf: dict[str, Any], env: dict[str, Any], want: bool | None) -> None:
    assert evaluate(cond(leaf), env) is want


def test_kleene_and_or_not() -> None:
    c = cond({"all": [{"var": "a", "eq": 1}, {"var": "b", "eq": 1}]})
    assert evaluate(c, {"a": 0}) is False  # False wins in all, even with b unknown
    assert evaluate(c, {"a": 1}) is None
    d = cond({"any": [{"var": "a", "eq": 1}, {"var": "b", "eq": 1}]})
    assert evaluate(d, {"a": 1}) is True  # True wins in any
    assert evaluate(d, {"a": 0}) is None
    n = cond({"not": {"var": "a", "eq": 1}})
    assert evaluate(n, {}) is None
    assert evaluate(n, {"a": 2}) is True
    assert evaluate(None, {}) is True


def test_residual_keeps_only_unknown_parts() -> None:
    c = cond({"all": [{"var": "sm", "eq": "sm90"}, {"var": "head_dim", "le": 256}, {"var": "cuda", "ge": "12.3"}]})
    r = residual(c, {"sm": "sm90"})
    assert describe(r) == "head_dim <= 256 and cuda >= 12.3"
    assert unknown_vars(c, {"sm": "sm90"}) == ["cuda", "head_dim"]
    assert residual(c, {"sm": "sm80"}) is False
    assert unknown_vars(c, {"sm": "sm80"}) == []


def test_pass_condition_of_reject_claim() -> None:
    when = cond({"var": "kv_dtype", "in": ["fp8_e4m3"]})
    req = cond({"var": "sm", "eq": "sm90"})
    p = passes_or_not_applies(when, req)
    assert evaluate(p, {"sm": "sm80"}) is None  # depends on kv_dtype
    assert describe(residual(p, {"sm": "sm80"})) == "not (kv_dtype in [fp8_e4m3])"
    assert evaluate(p, {"sm": "sm80", "kv_dtype": "bf16"}) is True


def test_false_leaves_and_allowed() -> None:
    c = cond({"all": [{"var": "head_dim", "le": 256}, {"var": "head_dim", "multiple_of": 8}]})
    leaves = false_leaves(c, {"head_dim": 264})
    assert [x[1] for x in leaves] == ["le"]
    assert allowed_values(cond({"var": "head_dim", "in": [64, 128]})) == [64, 128]
    assert allowed_values(c) == "head_dim <= 256 and head_dim % 8 == 0"


@pytest.mark.parametrize(("a", "b", "want"), [
    ("12.8", "12.8.0", 0), ("12.10", "12.9", 1), ("0.6.18", "0.6.2", 1), ("2.8.0+cu128", "2.8.0", 0),
    ("0.11.0rc1", "0.11.0", -1), ("1.0.dev3", "1.0a1", -1), ("2026.09.30", "2026.9.30", 0), ("v13.1", "13.1", 0),
    ("0.7.2.post1", "0.7.2", 1), ("0.7.2.post1", "0.7.3", -1), ("0.6.18.post1", "0.6.18", 1),
    ("0.7.2.post2", "0.7.2.post1", 1),
])
def test_versions(a: str, b: str, want: int) -> None:
    assert compare_versions(a, b) == want
    assert compare_versions(b, a) == -want


# ---- property: a decided value never changes when the unknowns are filled in ---------------------

VARS = ["head_dim", "sm", "ctx"]
VALUES = {"head_dim": [64, 128, 256, 320], "sm": ["sm80", "sm90", "sm100"], "ctx": [1024, 131072]}


def leaves() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.sampled_from(VALUES["head_dim"]).map(lambda v: {"var": "head_dim", "le": v}),
        st.lists(st.sampled_from(VALUES["head_dim"]), min_size=1, max_size=3).map(lambda v: {"var": "head_dim",
                                                                                           "in": v}),
        st.sampled_from(VALUES["sm"]).map(lambda v: {"var": "sm", "eq": v}),
        st.sampled_from(VALUES["ctx"]).map(lambda v: {"var": "ctx", "ge": v}),
    )


trees = st.recursive(leaves(), lambda kids: st.one_of(
    st.lists(kids, min_size=1, max_size=3).map(lambda xs: {"all": xs}),
    st.lists(kids, min_size=1, max_size=3).map(lambda xs: {"any": xs}),
    kids.map(lambda x: {"not": x})), max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(trees, st.sets(st.sampled_from(VARS)))
def test_three_valued_is_sound(tree: dict[str, Any], known: set[str]) -> None:
    c = cond(tree)
    for full in itertools.product(*(VALUES[v] for v in VARS)):
        env_full = dict(zip(VARS, full, strict=True))
        env = {k: v for k, v in env_full.items() if k in known}
        partial, total = evaluate(c, env), evaluate(c, env_full)
        assert total is not None
        if partial is not None:
            assert partial is total
        r = residual(c, env)
        assert (r if isinstance(r, bool) else evaluate(r, env_full)) is total
        assert set(unknown_vars(c, env)) <= set(VARS) - known


SCALARS = st.one_of(st.booleans(), st.integers(-3, 300), st.sampled_from([64.0, 128.0, 0.5]),
                    st.sampled_from(["sm90", "SM90", "fp8_e4m3", "FP8_E4M3", "12.8", "12.8.0", "a"]))


@settings(max_examples=300, deadline=None)
@given(SCALARS, st.lists(SCALARS, max_size=6), st.sampled_from(["sm", "head_dim", "cuda", "kv_dtype", "causal"]))
def test_membership_fast_path_agrees_with_pairwise_comparison(value: Any, operands: list[Any], var: str) -> None:
    """`in` / `not_in` use a set lookup for all-text or all-number lists; it must say what comparing each
    operand would (case-insensitive text, 128 == 128.0, True is not 1, versions compared as versions)."""
    from kbtool.solve.conditions import _same

    x = tuple(operands)
    want = any(_same(value, o, var) for o in x)
    assert evaluate((var, "in", x), {var: value}) is want
    assert evaluate((var, "not_in", x), {var: value}) is (not want)
    if operands:
        assert evaluate((var, "eq", x[0]), {var: value}) is _same(value, x[0], var)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="0123456789.rcpostdev", max_size=8), max_size=12))
def test_version_key_sorts_as_compare_versions_does(versions: list[str]) -> None:
    import functools

    assert sorted(versions, key=version_key) == sorted(versions, key=functools.cmp_to_key(compare_versions))
    assert sorted(["0.10.0", "0.9.2", "0.10.0rc1", "0.10.0.post1"], key=version_key) == [
        "0.9.2", "0.10.0rc1", "0.10.0", "0.10.0.post1"]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="0123456789abcxyzRC.+-_ é", max_size=16))
def test_version_tokens_agree_with_the_regex_they_replaced(text: str) -> None:
    import re

    from kbtool.solve.conditions import _tokens

    assert _tokens(text) == re.findall(r"[0-9]+|[a-z]+", text)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="{}ab_-9 Z?", max_size=16), st.booleans())
def test_placeholder_fill_agrees_with_the_regex_it_replaced(template: str, flag: bool) -> None:
    import re

    from kbtool.solve.templates import fill, placeholders

    pat = re.compile(r"\{([a-z_][a-z0-9_-]*)\}")
    env = {"a": 7, "b_": flag, "a-9": "x"}

    def sub(m: re.Match[str]) -> str:
        v = env.get(m.group(1))
        return "not given" if v is None else str(v).lower() if isinstance(v, bool) else str(v)

    assert fill(template, env) == pat.sub(sub, template)
    assert placeholders(template) == set(pat.findall(template))
