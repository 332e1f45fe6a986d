"""kb's SGLang pool held to real SGLang boots: every case the sglang-boot probe booted on the H200 (SGLang
0.5.17, dummy weights; records/evidence/*-sglang-boot.yaml) is asked again as the serve line it ran, and kb's
max_total_num_tokens, mem_fraction_static and page size must match what SGLang printed.

The tolerance is SGLang's own noise, not kb's: the pool is `free-before-load x mem_fraction_static - weights`
over the bytes per token, and kb knows the free memory before the load only from the recorded CUDA context
(kbtool/solve/engines/sglang/pool.py CONTEXT_BYTES), so a case may differ by a few MB of allocator state (0.2%)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kbtool.query_cli import image
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve

ROOT = Path(__file__).parents[2]
EVIDENCE = sorted((ROOT / "records" / "evidence").glob("*-sglang-boot*.yaml"))
ARITHMETIC, END_TO_END = 0.001, 0.005
GIB = 1 << 30


def _booted() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in EVIDENCE:
        doc = yaml.safe_load(path.read_text())
        for case in doc["cases"]:
            if case["outcome"] == "OK" and (case.get("metrics") or {}).get("max_total_num_tokens"):
                out.append((f"{path.stem}:{case['params']['id']}", case))
    return out


BOOTED = _booted()


def _line(case: dict[str, Any]) -> str:
    m = case["metrics"]
    flags = dict(m["flags"])
    model = Path(flags.pop("model_path", case["params"]["model"]))  # the config the probe booted, in this checkout
    where = ROOT / "probes" / "vllm_boot" / "models" / model.name
    words = ["python", "-m", "sglang.launch_server", "--model-path", str(where if where.is_dir() else model)]
    for key, value in flags.items():
        if key in ("load_format", "skip_tokenizer_init", "log_level", "random_seed"):
            continue  # how the probe booted (dummy weights, no tokenizer), not what sizes the pool
        if value is True:
            words.append("--" + key.replace("_", "-"))
        elif value not in (None, False):
            words += ["--" + key.replace("_", "-"), str(value)]
    return " ".join(words)


@pytest.fixture(scope="module")
def img():  # type: ignore[no-untyped-def]
    return image()


def test_there_are_boots_to_hold_the_pool_to() -> None:
    assert len(BOOTED) >= 7


@pytest.mark.parametrize("case", [c for _, c in BOOTED], ids=[i for i, _ in BOOTED])
def test_pool_is_what_sglang_booted(img, case: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    m = case["metrics"]
    a = solve(img, build_query(gpu=m.get("accelerator") or "h200", sglang_args=_line(case),
                               sglang=m.get("release")))
    report = a.answers[0].memory.engine_report if hasattr(a, "answers") else a.memory.engine_report
    assert report is not None, _line(case)
    assert report["mem_fraction_static"] == pytest.approx(m["mem_fraction_static"], abs=5e-4), _line(case)
    assert report["page_size"] == m["page_size"], _line(case)
    booted = m["max_total_num_tokens"]
    cell = report["cell_bytes"]
    if not m["flags"].get("max_total_tokens"):
        budget = m["load_begin_avail_gb"] * GIB * m["mem_fraction_static"] - m["weights_gb"] * GIB
        arithmetic = int(budget // cell) // m["page_size"] * m["page_size"]
        assert abs(arithmetic - booted) <= ARITHMETIC * booted, f"{_line(case)}: {arithmetic:,} vs {booted:,}"
    assert abs(report["max_total_num_tokens"] - booted) <= END_TO_END * booted, (
        f"{_line(case)}: kb {report['max_total_num_tokens']:,} vs SGLang {booted:,}")
