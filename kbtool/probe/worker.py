"""The worker process: loads one probe module and runs the cases it is sent, one JSON line each.

    python -m kbtool.probe.worker <module-ref>

Protocol: the runner writes one case (a JSON object) per line to stdin; the worker answers one JSON line per
case on the file descriptor it was given in KB_PROBE_FD (default: its original stdout), and sends everything
libraries print to stderr so that nothing else reaches the protocol channel. A crash, hang or OOM kills only
this process; the runner records it and starts a fresh one for the remaining cases.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from typing import Any, TextIO

from kbtool.probe.outcome import classify_exception, normalize_result
from kbtool.probe.spec import load_module

MAX_MESSAGE = 2000


def _jsonable(value: Any) -> Any:
    """Make a probe's result safe for JSON: NaN/inf as strings, unknown objects as repr."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)


def _protocol_channel() -> TextIO:
    fd = int(os.environ.get("KB_PROBE_FD", "-1"))
    if fd < 0:
        fd = os.dup(1)
        os.dup2(2, 1)  # library prints go to stderr from now on
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1)


def run_case(run: Any, case: dict[str, Any]) -> dict[str, Any]:
    start = time.monotonic()
    result: dict[str, Any]
    try:
        result = normalize_result(run(case))
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        message = f"{type(exc).__name__}: {exc}".strip()
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        result = {
            "outcome": classify_exception(type(exc).__name__, str(exc)),
            "message": message[:MAX_MESSAGE],
            "kernels": [],
            "max_abs_err": None,
            "metrics": {"exception": type(exc).__name__, "traceback_tail": "".join(tb[-3:])[-1500:]},
        }
    result["seconds"] = round(time.monotonic() - start, 3)
    text = result.get("message")
    if isinstance(text, str):
        result["message"] = text[:MAX_MESSAGE]
    clean: dict[str, Any] = _jsonable(result)
    return clean


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m kbtool.probe.worker <module-ref>", file=sys.stderr)
        return 2
    out = _protocol_channel()
    mod = load_module(argv[0])
    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        case = json.loads(line)
        result = run_case(mod.run, case)
        out.write(json.dumps(result) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
