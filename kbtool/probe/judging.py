"""Pure judging of gate claims against a probe's cases (design.md §5, issue 20 item 1).

Every case gets, for each claim, a prediction (True: runs, False: refused, None: not gated) and an outcome: it
ran cleanly, it was refused (with the reason code its message names, when one can be read), or it gave no clear
answer (crash, timeout, OOM, wrong result). Then, per claim:

- contradicted: a case it predicts refused ran cleanly, or a case it predicts runs was refused for the reason
  the claim names (its `reason.code`);
- a refusal another claim of the same judge predicts (for that refusal's reason) is attributed to that claim and
  counts for nothing here;
- confirmed: at least one gated case, and every gated case not attributed elsewhere came out as predicted;
- inconclusive otherwise (nothing gated, or a gated case without a clear answer, or a refusal nobody explains).
Cases a claim does not gate count for nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Expect = Callable[[dict[str, Any]], bool | None]
"""For a case's params: True if the claim says it runs, False if it says it is refused, None if it says nothing."""
ReasonOf = Callable[[dict[str, Any]], str | None]
"""For an observation that did not run: the reason code its message names (ARCH, HEAD_DIM, ...), or None."""

_KEYWORDS: tuple[tuple[str, str], ...] = (  # the most specific family first: head-dim messages often name the arch
    (r"needs network|cubin package|checksums\.txt|connection|urlopen|max retries|download", "NETWORK"),
    (r"head[_ ]?dim|head[_ ]?size|last dimension|headdim|hidden_dim|d_qk|d_v\b", "HEAD_DIM"),
    (r"kv[_ ]?(cache )?(data ?type|dtype)|fp8 kv|kv_data_type|fp8 query|to have the same dtype", "KV_DTYPE"),
    (r"dtype|data ?type|float8|fp8|fp32|float32|bfloat16|half", "DTYPE"),
    (r"page[_ ]?size|block[_ ]?size|tokens per page|numtokensperpage", "BLOCK_SIZE"),
    (r"no supported cuda architectures|compute capability|sm_?\d{2,3}a?\b|architecture|"
     r"not supported on this (gpu|device)|major versions", "ARCH"),
)


def reason_from_text(text: str) -> str | None:
    """The reason code a refusal message names, by keywords (the first family that matches)."""
    low = text.lower()
    for pattern, code in _KEYWORDS:
        if re.search(pattern, low):
            return code
    return None


def default_reason(obs: dict[str, Any]) -> str | None:
    metrics = obs.get("metrics") or {}
    if isinstance(metrics.get("gate"), str):
        return str(metrics["gate"])
    return reason_from_text(str(obs.get("message") or ""))


def accepted(obs: dict[str, Any]) -> bool | None:
    """True if the case ran and gave a correct result, False if the library refused it, None otherwise
    (crash, timeout, OOM, or ran with a wrong result: none of these says whether the gate lets it through)."""
    if obs.get("outcome") == "OK":
        return None if (obs.get("metrics") or {}).get("correct") is False else True
    if obs.get("outcome") == "UNSUPPORTED":
        return False
    return None


PROBE_FAULT = "PROBE"
"""A reason code a probe's reason_of returns for a refusal caused by the probe's own call (no gate at all)."""


@dataclass(frozen=True)
class Gate:
    """One claim as a judge sees it: what it predicts per case, and the reason code it names."""

    claim: str
    expect: Expect
    reason: str | None = None


def _outcome(obs: dict[str, Any], reason_of: ReasonOf) -> tuple[str, str | None]:
    """("ran" | "refused" | "unclear", reason code). An ERROR whose message names a known gate is a refusal
    (FlashInfer's JIT arch gate raises a RuntimeError that older runners recorded as ERROR)."""
    got = accepted(obs)
    if got is True:
        return "ran", None
    if got is False:
        code = reason_of(obs)
        return ("unclear", None) if code == PROBE_FAULT else ("refused", code)
    if obs.get("outcome") == "ERROR":
        code = reason_of(obs)
        if code is not None and code != PROBE_FAULT:
            return "refused", code
    return "unclear", None


def _labels(items: Iterable[dict[str, Any]], label: Callable[[dict[str, Any]], str]) -> str:
    seen: list[str] = []
    for p in items:
        text = label(p)
        if text not in seen:
            seen.append(text)
    return ", ".join(seen)


def judge_gate(
    gate: Gate,
    observations: list[dict[str, Any]],
    scope: dict[str, Any],
    label: Callable[[dict[str, Any]], str],
    *,
    others: list[Gate] = (),  # type: ignore[assignment]
    reason_of: ReasonOf = default_reason,
) -> dict[str, Any]:
    """The verdict on one claim; `others` are the judge's other claims, to which refusals may be attributed."""
    agree: list[dict[str, Any]] = []
    ran_against: list[dict[str, Any]] = []
    refused_against: list[dict[str, Any]] = []
    attributed: dict[str, list[dict[str, Any]]] = {}
    unexplained: dict[str, list[dict[str, Any]]] = {}
    unclear: list[dict[str, Any]] = []
    for obs in observations:
        params = obs.get("params") or {}
        want = gate.expect(params)
        if want is None or obs.get("outcome") == "SKIPPED":
            continue
        kind, code = _outcome(obs, reason_of)
        if kind == "unclear":
            unclear.append(params)
            continue
        if kind == "ran":
            (agree if want else ran_against).append(params)
            continue
        own = code is None or gate.reason is None or code == gate.reason
        explainers = [g.claim for g in others if g.claim != gate.claim and g.expect(params) is False
                      and (code is None or g.reason is None or g.reason == code)]
        if want is False and own:
            agree.append(params)
        elif explainers and (want or not own):
            attributed.setdefault(explainers[0], []).append(params)
        elif want and code is not None and code == gate.reason:
            refused_against.append(params)
        elif want is False:
            attributed.setdefault(f"another reason ({code})", []).append(params)
        else:
            unexplained.setdefault(str(code), []).append(params)
    counted = len(agree) + len(ran_against) + len(refused_against)
    if ran_against or refused_against:
        verdict = "contradicted"
    elif agree and not unexplained and not unclear:
        verdict = "confirmed"
    else:
        verdict = "inconclusive"
    parts = [f"{len(agree)} of {counted} gated cases as the claim predicts"]
    if ran_against:
        parts.append(f"ran although the claim says refused: {_labels(ran_against, label)}")
    if refused_against:
        parts.append(f"refused for the claim's own reason ({gate.reason}) although it says runs: "
                     f"{_labels(refused_against, label)}")
    for who, items in attributed.items():
        parts.append(f"refusals attributed to {who}: {_labels(items, label)}")
    for code, items in unexplained.items():
        parts.append(f"refused for a reason no claim names ({code}): {_labels(items, label)}")
    if unclear:
        parts.append(f"no clear answer (error, timeout, OOM or wrong result): {_labels(unclear, label)}")
    return {"claim": gate.claim, "verdict": verdict, "scope": scope, "detail": "; ".join(parts)}


def judge_gates(
    gates: list[Gate],
    observations: list[dict[str, Any]],
    scope_of: Callable[[Gate], dict[str, Any]],
    label: Callable[[dict[str, Any]], str],
    *,
    reason_of: ReasonOf = default_reason,
) -> list[dict[str, Any]]:
    """Every gate judged with the others as possible explanations of its refusals."""
    return [judge_gate(g, observations, scope_of(g), label, others=gates, reason_of=reason_of) for g in gates]


def gate_verdict(
    claim: str,
    observations: list[dict[str, Any]],
    expect: Expect,
    scope: dict[str, Any],
    label: Callable[[dict[str, Any]], str],
    reason: str | None = None,
) -> dict[str, Any]:
    """One claim judged alone (no other claim to attribute refusals to)."""
    return judge_gate(Gate(claim, expect, reason), observations, scope, label)


# ---- gates read off the claims themselves -------------------------------------------------------

ClaimData = Mapping[str, Any]
"""{"subject", "effect", "when", "requires", "reason": code}: what kb_context gives a judge per claim."""
Variables = Callable[[dict[str, Any]], dict[str, Any]]
"""For a case's params: the query variables it fixes (dtype, kv_dtype, head_dim, phase, sm, cc, vendor, ...)."""


def claim_expect(claim: ClaimData, subjects: Callable[[dict[str, Any]], Iterable[str]], variables: Variables) -> Expect:
    """A claim's prediction per case from its own `when` and `requires`: only cases that exercise its subject are
    gated; `when` false or unknown leaves the case ungated; `requires` gives runs/refused (unknown: ungated).
    A `supports` claim without `requires` predicts that every case it covers runs."""
    from kbtool.solve.conditions import evaluate

    when, requires = claim.get("when"), claim.get("requires")

    def expect(params: dict[str, Any]) -> bool | None:
        if claim.get("subject") not in set(subjects(params)):
            return None
        bound = variables(params)
        if when is not None and evaluate(when, bound) is not True:
            return None
        if claim.get("effect") in ("caveat", "fails") or (requires is None and claim.get("effect") != "supports"):
            return None  # a caveat's `requires` says when it bites, not what is refused
        result = evaluate(requires, bound)
        return None if result is None else bool(result)

    return expect


def claim_gates(
    claims: Mapping[str, ClaimData],
    ids: Iterable[str],
    subjects: Callable[[dict[str, Any]], Iterable[str]],
    variables: Variables,
    overrides: Mapping[str, Expect] | None = None,
) -> list[Gate]:
    """Gates for the claims `ids` (those present in `claims`); `overrides` replace a claim's own prediction
    where its condition tree leaves out a variable the probe knows (a cuDNN version, say)."""
    out = []
    for cid in ids:
        data = claims.get(cid)
        if data is None:
            continue
        expect = (overrides or {}).get(cid) or claim_expect(data, subjects, variables)
        out.append(Gate(cid, expect, data.get("reason")))
    return out


def env_vars(env: Mapping[str, Any]) -> dict[str, Any]:
    """The query variables a run's environment fixes for every case: vendor, sm, cc, cuda."""
    import contextlib

    gpu = str(env.get("gpu") or "").lower()
    out: dict[str, Any] = {"vendor": "amd" if gpu.startswith(("amd", "instinct")) else "nvidia",
                           "sm": env.get("architecture"), "cuda": env.get("cuda")}
    with contextlib.suppress(TypeError, ValueError):
        out["cc"] = float(env.get("compute_capability") or "")
    return out


def values(observations: list[dict[str, Any]], key: str, where: Callable[[dict[str, Any]], bool]) -> list[Any]:
    """Sorted distinct values of one parameter among the cases that match `where` (for verdict scopes)."""
    out = {(obs.get("params") or {}).get(key) for obs in observations if where(obs.get("params") or {})}
    return sorted((v for v in out if v is not None), key=str)


def outcome_rows(observations: list[dict[str, Any]], label: Callable[[dict[str, Any]], str]) -> list[str]:
    """One line per case for an evidence record's `data.outcomes`: label, outcome (OK-but-wrong when the result was
    wrong), the relative error where measured, and the library's message."""
    rows = []
    for o in observations:
        p, m = o.get("params") or {}, o.get("metrics") or {}
        outcome = str(o.get("outcome"))
        if outcome == "OK" and m.get("correct") is False:
            outcome = "OK-but-wrong"
        err = f" rel_l2 {m['rel_l2']:.1e}" if "rel_l2" in m else ""
        why = f": {str(o.get('message'))[:120]}" if o.get("message") else ""
        rows.append(f"{label(p)}: {outcome}{err}{why}")
    return rows
