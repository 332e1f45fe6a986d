"""The engines kb answers for, written out (as pre-commit's all_languages.py): adding one is its folder under
kbtool/solve/engines/, one line here and its test (CONTRIBUTING.md, "Add an engine"). The solver asks `get(name)`
and never branches on an engine's name.

Engine modules import only the contract at import time (their work is imported on first use), so loading the
registry stays cheap on the query path."""

from __future__ import annotations

from kbtool.solve.engines.base import Engine
from kbtool.solve.engines.sglang.engine import Sglang
from kbtool.solve.engines.vllm.engine import Vllm

ENGINES: dict[str, Engine] = {
    "vllm": Vllm(),
    "sglang": Sglang(),
}

ACCOUNTING = "vllm"
"""The engine whose memory accounting sizes an answer without --engine (named on the answer's `assumed:` line)."""


def get(name: str | None) -> Engine | None:
    """The engine named (None for "none" or no name)."""
    if not name or name == "none":
        return None
    return ENGINES[name]


def names() -> list[str]:
    """The engines kb answers for, in the registry's order."""
    return list(ENGINES)


def accounting() -> Engine:
    """The engine whose accounting sizes memory without --engine."""
    return ENGINES[ACCOUNTING]
