"""`--engine vllm,sglang`: the same question to each engine, and where their answers differ (backend, page size,
pool tokens, verdict). Each engine's module writes its own `digest` into its answer's engine block
(kbtool/solve/engines.py); this module only sets them side by side."""

from __future__ import annotations

from kbtool.errors import UsageError
from kbtool.solve.answer import Answer, EngineComparison

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ASPECTS = (("prefill", "prefill backend"), ("decode", "decode backend"), ("page_size", "paged-KV block (page) size"),
           ("pool_tokens", "KV pool tokens at start-up"))


def split_engines(text: str | None) -> list[str]:
    """'vllm,sglang' -> ['vllm', 'sglang'] (one name: a list of one)."""
    names = [n.strip().lower() for n in (text or "none").split(",") if n.strip()]
    if len(names) != len(set(names)):
        raise UsageError(f"--engine {text}: an engine named twice", fix="e.g. --engine vllm,sglang")
    if len(names) > 1 and "none" in names:
        raise UsageError(f"--engine {text}: 'none' cannot be compared", fix="e.g. --engine vllm,sglang")
    return names or ["none"]


def digest(a: Answer) -> dict[str, Any]:
    e = a.engine or {}
    d = dict(e.get("digest") or {})
    d.setdefault("label", e.get("label") or a.query.get("engine"))
    return {"engine": a.query.get("engine"), "verdict": a.verdict, **d}


def compare(answers: list[Answer]) -> EngineComparison:
    digests = [digest(a) for a in answers]
    out: list[str] = []
    verdicts = {d["verdict"] for d in digests}
    if len(verdicts) > 1:
        out.append("verdict: " + "; ".join(f"{d['label']} {d['verdict']}" for d in digests)
                   + "".join(f" ({d['label']}: {d['error']})" for d in digests if d.get("error")))
    for key, what in ASPECTS:
        values = [d.get(key) for d in digests]
        if any(v is None for v in values) or len(set(values)) < 2:
            continue
        shown = "; ".join(f"{d['label']} {d[key]:,}" if isinstance(d[key], int) else f"{d['label']} {d[key]}"
                          for d in digests)
        why = [str(d[f"{key}_why"]) for d in digests if d.get(f"{key}_why")]
        out.append(f"{what}: {shown}" + (f" ({'; '.join(why)})" if why else ""))
    common = {k: v for k, v in answers[0].query.items() if all(a.query.get(k) == v for a in answers[1:])}
    return EngineComparison(query=common, answers=answers, digest=digests, differences=out)
