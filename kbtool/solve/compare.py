"""`--engine vllm,sglang`: the same question to each engine, and where their answers differ (backend, page size,
pool tokens, verdict), from each answer's pick and pool (kbtool/solve/engines/results.py); kbtool/render/verdict.py
words the differences."""

from __future__ import annotations

from kbtool.solve.answer import Answer, EngineComparison

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def digest(a: Answer) -> dict[str, Any]:
    """What the comparison sets side by side, from the engine's pick and pool."""
    e = a.engine or {}
    pool = a.memory.pool if a.memory is not None else None
    by = e.get("page_size_by")
    return {"engine": a.query.get("engine"), "verdict": a.verdict, "label": e.get("label") or a.query.get("engine"),
            "error": e.get("error"), "prefill": e.get("prefill"), "decode": e.get("decode"),
            "page_size": e.get("page_size") if e.get("page_size") is not None else a.assumed.get("block_size"),
            "page_size_why": by, "pool_tokens": pool.tokens if pool is not None else None}


def compare(answers: list[Answer]) -> EngineComparison:
    """The answers side by side; kbtool/render/verdict.py words where they differ."""
    common = {k: v for k, v in answers[0].query.items() if all(a.query.get(k) == v for a in answers[1:])}
    return EngineComparison(query=common, answers=answers, digest=[digest(a) for a in answers], differences=[])
