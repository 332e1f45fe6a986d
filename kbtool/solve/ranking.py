"""Measured ranking: order the kernels that pass every gate by latency measured on the queried GPU.

Uses the bench measurement records (kbtool.measure.rank) and the study's separation rule, so the answer says
"no clear winner" when the rule says so, and cites the measurement records it used.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.image import Image
    from kbtool.solve.parts import KernelAnswer

PASSING = ("ok", "caveat")


def measured_ranking(img: Image, gpu: str, phases: list[str], envs: dict[str, dict[str, Any]],
                     kernels: list[KernelAnswer]) -> dict[str, Any] | None:
    """{phase: ranking} for the phases with matching measurements; ranks set on `kernels` in place."""
    rows = img.bench_rows(gpu)
    if not rows:
        return None
    from kbtool.measure.rank import rank_rows

    out: dict[str, Any] = {}
    for phase in phases:
        passing = [k.id for k in kernels if k.phase_status.get(phase, k.status) in PASSING]
        if not passing:
            continue
        env = envs[phase]
        config = {"phase": phase, "ctx": env.get("ctx"), "batch": env.get("batch"), "head_dim": env.get("head_dim"),
                  "dtype": env.get("dtype")}
        r = rank_rows(rows, gpu, {k: v for k, v in config.items() if v is not None}, kernels=passing)
        if r is not None and r["ranking"]:
            out[phase] = r
    if not out:
        return None
    best: dict[str, tuple[int, dict[str, Any]]] = {}
    for phase, r in out.items():
        for i, row in enumerate(r["ranking"], 1):
            if row["kernel"] not in best or i < best[row["kernel"]][0]:
                best[row["kernel"]] = (i, {"phase": phase, **row})
    for k in kernels:
        if k.id in best:
            k.rank, k.measured = best[k.id]
    return out
