"""Helpers for probes' pure judges: compare what a gate claim predicts with what each case did."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Expect = Callable[[dict[str, Any]], bool | None]
"""For a case's params: True if the claim says it runs, False if it says it is refused, None if it says nothing."""


def accepted(obs: dict[str, Any]) -> bool | None:
    """True if the case ran and gave a correct result, False if the library refused it, None otherwise
    (crash, timeout, OOM, or ran with a wrong result: none of these says whether the gate lets it through)."""
    if obs.get("outcome") == "OK":
        return None if (obs.get("metrics") or {}).get("correct") is False else True
    if obs.get("outcome") == "UNSUPPORTED":
        return False
    return None


def _labels(items: Iterable[dict[str, Any]], label: Callable[[dict[str, Any]], str]) -> str:
    seen: list[str] = []
    for p in items:
        text = label(p)
        if text not in seen:
            seen.append(text)
    return ", ".join(seen)


def gate_verdict(
    claim: str,
    observations: list[dict[str, Any]],
    expect: Expect,
    scope: dict[str, Any],
    label: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """confirmed: every relevant case matched; contradicted: none did; partial: some did; inconclusive: no
    relevant case gave a clear answer. The detail names the cases that disagreed."""
    agree: list[dict[str, Any]] = []
    disagree: list[tuple[dict[str, Any], bool]] = []
    unclear: list[dict[str, Any]] = []
    for obs in observations:
        params = obs.get("params") or {}
        want = expect(params)
        if want is None:
            continue
        got = accepted(obs)
        if got is None:
            unclear.append(params)
        elif got == want:
            agree.append(params)
        else:
            disagree.append((params, want))
    if not agree and not disagree:
        verdict = "inconclusive"
    elif not disagree:
        verdict = "confirmed"
    elif not agree:
        verdict = "contradicted"
    else:
        verdict = "partial"
    parts = [f"{len(agree)} of {len(agree) + len(disagree)} clear cases as the claim says"]
    ran = [p for p, want in disagree if not want]
    refused = [p for p, want in disagree if want]
    if ran:
        parts.append(f"ran although the claim rejects: {_labels(ran, label)}")
    if refused:
        parts.append(f"refused although the claim allows: {_labels(refused, label)}")
    if unclear:
        parts.append(f"no clear answer (error, timeout, OOM or wrong result): {_labels(unclear, label)}")
    return {"claim": claim, "verdict": verdict, "scope": scope, "detail": "; ".join(parts)}


def values(observations: list[dict[str, Any]], key: str, where: Callable[[dict[str, Any]], bool]) -> list[Any]:
    """Sorted distinct values of one parameter among the cases that match `where` (for verdict scopes)."""
    out = {(obs.get("params") or {}).get(key) for obs in observations if where(obs.get("params") or {})}
    return sorted(v for v in out if v is not None)
