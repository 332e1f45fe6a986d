"""Evidence records: one per probe run, built from what the runner saw and the judge said, written once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kbtool.errors import ProbeError
from kbtool.escape import CONTROL  # the characters kb validate refuses in a record (KB404)
from kbtool.model import Evidence
from kbtool.model.evidence import Environment
from kbtool.probe.environment import gpu_slug
from kbtool.probe.runner import CaseResult
from kbtool.probe.spec import ProbeSpec

_ENV_FIELDS = set(Environment.model_fields)
_VERDICTS = {"confirmed", "contradicted", "partial", "inconclusive"}


def environment_model(env: dict[str, Any]) -> Environment:
    data = {k: v for k, v in env.items() if k in _ENV_FIELDS and v is not None}
    data.setdefault("gpu", "unknown")
    data.setdefault("compute_capability", "unknown")
    data["libraries"] = {str(k): str(v) for k, v in (env.get("libraries") or {}).items()}
    return Environment.model_validate(data)


def evidence_id(started: str, env: dict[str, Any], probe_id: str) -> str:
    """<date>-<gpu>-<probe>, e.g. 2026-11-30-nvidia-h200-sxm-sdpa-gates."""
    date = started[:10]
    return re.sub(r"[^a-z0-9.+-]+", "-", f"{date}-{gpu_slug(env)}-{probe_id}".lower())


def clean_verdicts(raw: list[dict[str, Any]], claims: list[str]) -> list[dict[str, Any]]:
    """Keep the judge's verdicts on the probe's declared claims, in the model's shape."""
    out = []
    for v in raw:
        if v.get("claim") not in claims or v.get("verdict") not in _VERDICTS:
            raise ProbeError(f"judge returned an invalid verdict {v!r}", fix="judge only the claims in SPEC.claims")
        out.append({k: v[k] for k in ("claim", "verdict", "scope", "detail") if v.get(k) is not None})
    return out


def build(
    spec: ProbeSpec,
    env: dict[str, Any],
    started: str,
    finished: str,
    results: list[CaseResult],
    verdicts: list[dict[str, Any]],
    *,
    data: dict[str, Any] | None = None,
    id_: str | None = None,
) -> Evidence:
    cases = []
    for r in results:
        case: dict[str, Any] = {"params": r.params, "outcome": r.outcome}
        if r.message:
            case["message"] = r.message
        if r.kernels:
            case["kernels"] = r.kernels
        if r.max_abs_err is not None:
            case["max_abs_err"] = r.max_abs_err
        if r.seconds is not None:
            case["seconds"] = r.seconds
        if r.metrics:
            case["metrics"] = r.metrics
        cases.append(case)
    record = {
        "id": id_ or evidence_id(started, env, spec.id),
        "kind": "evidence",
        "name": f"{spec.title or spec.id} on {env.get('gpu') or 'unknown GPU'}",
        "probe": {"id": spec.id, "version": spec.version},
        "environment": environment_model(env).model_dump(mode="json", exclude_none=True),
        "started": started,
        "finished": finished,
        "cases": cases,
        "verdicts": verdicts,
        "data": data or {},
        "sources": [{"type": "probe", "ref": f"probes/{spec.id.replace('-', '_')}.py"}],
    }
    try:
        return Evidence.model_validate(record)
    except ValidationError as exc:
        raise ProbeError(f"the evidence record for {spec.id} does not validate: {exc}") from exc


def free_path(folder: Path, evidence: Evidence) -> tuple[Path, Evidence]:
    """A file name that is not taken yet: a second run on the same day gets -2, -3, ..."""
    base = evidence.id
    n = 1
    while True:
        eid = base if n == 1 else f"{base}-{n}"
        path = folder / f"{eid}.yaml"
        if not path.exists():
            return path, evidence.model_copy(update={"id": eid})
        n += 1


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def printable(value: Any) -> Any:
    """`value` with terminal colour codes (a library's coloured error text) and other control characters taken
    out of every string, as the records' reader requires (newlines and tabs stay)."""
    if isinstance(value, str):
        return CONTROL.sub("", _ANSI.sub("", value))
    if isinstance(value, dict):
        return {k: printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable(v) for v in value]
    return value


def write(folder: Path, evidence: Evidence) -> tuple[Path, Evidence]:
    """Write a new evidence file; returns its path and the record (its id gains -2, -3 if the name was taken).
    Strings are written printable (`printable`): a run's error text may carry terminal colour codes."""
    path, evidence = free_path(folder, evidence)
    data = printable(evidence.model_dump(mode="json", exclude_defaults=True, by_alias=True))
    data = {"id": data.pop("id"), "kind": "evidence", **{k: v for k, v in data.items() if k != "kind"}}
    from kbtool.store.writer import write_new_record  # ruamel: only when writing

    write_new_record(path, data)
    return path, evidence


def load(path: Path) -> Evidence:
    """Read an evidence file written by `kb probe run` (for applying it elsewhere), through the untrusted-file
    reader (regular file, size, UTF-8, the record reader's node/depth/alias limits): exit 2 when it is not one."""
    from kbtool.store.reader import load_yaml
    from kbtool.store.untrusted import UntrustedInputError

    try:
        raw = load_yaml(path)
    except UntrustedInputError as exc:
        raise ProbeError(f"{exc.args[0]}: not a readable evidence record", fix=exc.fix) from None
    try:
        return Evidence.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "$"
        raise ProbeError(f"{path}: not a valid evidence record: {loc}: {err['msg']} ({exc.error_count()} "
                         "error(s))", fix="pass the files `kb probe run --out` wrote") from None
