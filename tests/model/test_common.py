"""Condition leaves (kbtool/model/common.py): an operand has its variable's type (issue 48), and a bad leaf is
reported alone at its operator, not beside every other branch of the condition union."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from kbtool.model.common import Condition, Leaf


class _Holder(BaseModel):
    c: Condition


@pytest.mark.parametrize("leaf, message", [
    ({"var": "head_dim", "le": "256"},
     "head_dim is compared with a number; '256' is a string: write le: 256 without quotes (a quoted number compares "
     "as text)"),
    ({"var": "ctx", "in": [4096, "8192"]},
     "ctx is compared with a number; '8192' is a string: write in: 8192 without quotes (a quoted number compares "
     "as text)"),
    ({"var": "head_dim", "ge": True}, "head_dim is compared with a number; True is bool: write a number"),
    ({"var": "cuda", "ge": 12.1}, "cuda is compared with a quoted version; 12.1 is float: quote it: ge: '12.1'"),
    ({"var": "sinks", "eq": "true"},
     "sinks is compared with true or false; 'true' is a string: write eq: true without quotes (a quoted number "
     "compares as text)"),
])
def test_an_operand_of_the_wrong_type_is_refused_at_its_operator(leaf: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as e:
        _Holder.model_validate({"c": {"all": [{"var": "ctx", "ge": 1}, leaf]}})
    errors = e.value.errors()
    assert len(errors) == 1  # no "missing field 'all'" from the other branches
    op = next(k for k in leaf if k != "var")
    assert errors[0]["loc"] == ("c", "All", "all", 1, "Leaf", op)
    assert errors[0]["ctx"]["error"].args[0] == message


@pytest.mark.parametrize("leaf", [{"var": "head_dim", "le": 256}, {"var": "cc", "ge": 9.0},
                                  {"var": "cuda", "ge": "12.3"}, {"var": "sinks", "eq": True},
                                  {"var": "gpu", "in": ["h100"]}, {"var": "head_dim", "multiple_of": 8},
                                  {"var": "no_such_var", "eq": "x"}])
def test_operands_of_the_right_type_pass(leaf: dict[str, object]) -> None:
    assert isinstance(Leaf.model_validate(leaf), Leaf)
