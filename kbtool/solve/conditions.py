"""Three-valued evaluation of claim conditions (design.md §2 "Conditions").

A variable missing from the environment is *unknown*. `evaluate` returns True, False or None (unknown) with
Kleene logic; `residual` partially evaluates a tree, leaving only the parts that depend on unknown inputs,
and `describe` renders a tree as text, so an answer can say "passes when head_dim in [64, 128, 256]".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kbtool.model.common import All, AnyOf, Condition, Leaf, Not, condition_vars
from kbtool.vocab import VARS

Tri = bool | None
Env = Mapping[str, Any]

# ---- versions ---------------------------------------------------------------------------------

_PRE = {"dev": -4, "a": -3, "alpha": -3, "b": -2, "beta": -2, "rc": -1, "c": -1, "pre": -1}


def parse_version(text: str | int | float) -> tuple[tuple[int, int | str], ...]:
    """A comparable key for '12.8', '0.6.18', '2026.09.30', '2.8.0+cu128', '0.11.0rc1', '1.0.0.dev3'.

    Numeric parts compare as numbers; a pre-release tag (dev, a, b, rc) sorts before the release; a local
    part after '+' is ignored. Trailing zeros do not matter: '12.8' == '12.8.0'.
    """
    s = str(text).strip().lower().lstrip("v").split("+", 1)[0]
    parts: list[tuple[int, int | str]] = []
    for tok in re.findall(r"[0-9]+|[a-z]+", s):
        if tok.isdigit():
            parts.append((0, int(tok)))
        else:
            parts.append((-1, _PRE.get(tok, -5)))
    while parts and parts[-1] == (0, 0):
        parts.pop()
    return tuple(parts)


def compare_versions(a: str | int | float, b: str | int | float) -> int:
    ka, kb_ = parse_version(a), parse_version(b)
    # pad with a release marker so that '1.0' > '1.0rc1' and '1.0' < '1.0.1'
    n = max(len(ka), len(kb_))
    pa = ka + ((0, 0),) * (n - len(ka))
    pb = kb_ + ((0, 0),) * (n - len(kb_))
    return (pa > pb) - (pa < pb)


# ---- leaves -----------------------------------------------------------------------------------


def _is_version_var(var: str) -> bool:
    spec = VARS.get(var)
    return spec is not None and spec[0] == "version"


def _same(value: Any, operand: Any, var: str) -> bool:
    if _is_version_var(var):
        return compare_versions(value, operand) == 0
    if isinstance(value, bool) or isinstance(operand, bool):
        return isinstance(value, bool) and isinstance(operand, bool) and value == operand
    if isinstance(value, int | float) and isinstance(operand, int | float):
        return float(value) == float(operand)
    if isinstance(value, str) and isinstance(operand, str):
        return value.lower() == operand.lower()
    return bool(value == operand)


def _order(value: Any, operand: Any, var: str) -> int | None:
    if _is_version_var(var) or (isinstance(value, str) and isinstance(operand, str)):
        return compare_versions(value, operand)
    if isinstance(value, int | float) and isinstance(operand, int | float) and not isinstance(value, bool):
        return (value > operand) - (value < operand)
    return None


def eval_leaf(leaf: Leaf, env: Env) -> Tri:
    if leaf.var not in env or env[leaf.var] is None:
        return None
    v = env[leaf.var]
    op, x = leaf.op, leaf.operand
    if op == "eq":
        return _same(v, x, leaf.var)
    if op == "ne":
        return not _same(v, x, leaf.var)
    if op == "in":
        return any(_same(v, o, leaf.var) for o in x)
    if op == "not_in":
        return not any(_same(v, o, leaf.var) for o in x)
    if op == "multiple_of":
        return isinstance(v, int) and not isinstance(v, bool) and v % int(x) == 0
    c = _order(v, x, leaf.var)
    if c is None:
        return False
    return {"ge": c >= 0, "gt": c > 0, "le": c <= 0, "lt": c < 0}[op]


# ---- trees ------------------------------------------------------------------------------------


def evaluate(cond: Condition | None, env: Env) -> Tri:
    """Kleene three-valued evaluation; a missing condition is True."""
    if cond is None:
        return True
    if isinstance(cond, Leaf):
        return eval_leaf(cond, env)
    if isinstance(cond, All):
        vals = [evaluate(c, env) for c in cond.all]
        if any(v is False for v in vals):
            return False
        return None if any(v is None for v in vals) else True
    if isinstance(cond, AnyOf):
        vals = [evaluate(c, env) for c in cond.any]
        if any(v is True for v in vals):
            return True
        return None if any(v is None for v in vals) else False
    inner = evaluate(cond.not_, env)
    return None if inner is None else not inner


def residual(cond: Condition | None, env: Env) -> Condition | bool:
    """The part of `cond` still undecided given `env`: True, False, or a smaller tree over unknown vars."""
    if cond is None:
        return True
    if isinstance(cond, Leaf):
        v = eval_leaf(cond, env)
        return cond if v is None else v
    if isinstance(cond, Not):
        r = residual(cond.not_, env)
        return (not r) if isinstance(r, bool) else Not.model_validate({"not": r})
    is_all = isinstance(cond, All)
    kids = cond.all if isinstance(cond, All) else cond.any
    rest: list[Condition] = []
    for c in kids:
        r = residual(c, env)
        if isinstance(r, bool):
            if r is not is_all:  # False inside all, True inside any: decided
                return r
            continue
        rest.append(r)
    if not rest:
        return is_all
    if len(rest) == 1:
        return rest[0]
    return All(all=rest) if is_all else AnyOf(any=rest)


def unknown_vars(cond: Condition | None, env: Env) -> list[str]:
    """The inputs, not given, that the condition's value depends on (sorted)."""
    r = residual(cond, env)
    return [] if isinstance(r, bool) else sorted(condition_vars(r))


def false_leaves(cond: Condition | None, env: Env) -> list[Leaf]:
    """The leaves that make a False condition false (for messages: observed vs allowed)."""
    if cond is None or evaluate(cond, env) is not False:
        return []
    if isinstance(cond, Leaf):
        return [cond]
    if isinstance(cond, All):
        return [leaf for c in cond.all if evaluate(c, env) is False for leaf in false_leaves(c, env)]
    if isinstance(cond, AnyOf):
        return [leaf for c in cond.any for leaf in false_leaves(c, env)]
    return [leaf for leaf in _leaves(cond.not_) if eval_leaf(leaf, env) is True]


def _leaves(cond: Condition) -> list[Leaf]:
    if isinstance(cond, Leaf):
        return [cond]
    if isinstance(cond, All):
        return [x for c in cond.all for x in _leaves(c)]
    if isinstance(cond, AnyOf):
        return [x for c in cond.any for x in _leaves(c)]
    return _leaves(cond.not_)


_OPS = {"eq": "==", "ne": "!=", "ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def _fmt(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(i) for i in x) + "]"
    return str(x)


def describe(cond: Condition | bool | None) -> str:
    """A condition as short text: `head_dim <= 256 and head_dim % 8 == 0`."""
    if cond is None or cond is True:
        return "always"
    if cond is False:
        return "never"
    if isinstance(cond, Leaf):
        op, x = cond.op, cond.operand
        if op == "in":
            return f"{cond.var} in {_fmt(x)}"
        if op == "not_in":
            return f"{cond.var} not in {_fmt(x)}"
        if op == "multiple_of":
            return f"{cond.var} % {x} == 0"
        return f"{cond.var} {_OPS[op]} {_fmt(x)}"
    if isinstance(cond, Not):
        return f"not ({describe(cond.not_)})"
    if isinstance(cond, All):
        return " and ".join(_wrap(c) for c in cond.all)
    assert isinstance(cond, AnyOf)
    return " or ".join(_wrap(c) for c in cond.any)


def _wrap(c: Condition) -> str:
    return f"({describe(c)})" if isinstance(c, All | AnyOf) else describe(c)


def allowed_values(cond: Condition | bool) -> Any:
    """What would pass, as data where it is simple: the list of an `in` leaf, else the text."""
    if isinstance(cond, Leaf) and cond.op == "in":
        return list(cond.operand)
    return describe(cond)


def passes_or_not_applies(when: Condition | None, requires: Condition | None) -> Condition | None:
    """`(not when) or requires`: a reject claim is satisfied exactly when this holds."""
    if when is None:
        return requires
    if requires is None:
        return None
    return AnyOf(any=[Not.model_validate({"not": when}), requires])
