"""The context of one query: the KB, the normalized inputs and what is resolved once per query."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from kbtool.kb import KB
from kbtool.model import Claim, EngineBackend, Kernel, Model
from kbtool.solve.query import Query


@dataclass
class Ctx:
    """Everything resolved once per query."""

    kb: KB
    q: Query
    model: Model | None
    kernels: list[Kernel]
    by_subject: dict[str, list[Claim]] = field(default_factory=lambda: defaultdict(list))
    backends: list[EngineBackend] = field(default_factory=list)
