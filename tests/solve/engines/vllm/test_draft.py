"""The fitting inside kbtool/solve/engines/vllm/draft.py on inputs changed in memory (never written as evidence):
a batch tier whose values move is re-valued and reported; a tier structure the previous release lacks is left
unresolved, never invented."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from kbtool.kb import load_kb
from kbtool.solve.engines.vllm import conformance, draft
from kbtool.solve.engines.vllm import defaults as vd
from kbtool.solve.image import Image
from kbtool.solve.imagebuild import image_of
from tests.util import RECORDS, ROOT


@cache
def _setup() -> tuple[Image, Any, dict[str, Any]]:
    kb = load_kb(RECORDS)[0]
    doc = conformance.evidence_grids(RECORDS, ROOT, conformance.CONFIG_PROBE, "0.33.0")[-1]
    return image_of(kb), kb.get("vllm-0.33.0"), doc


def _fit(doc: dict[str, Any]) -> tuple[Any, ...]:
    img, prev, _ = _setup()
    values = {n: draft._value(getattr(prev.defaults, n)) for n in vd.FIELDS}
    batch = [{k: getattr(t, k) for k in draft.BATCH_KEYS} for t in prev.batch]
    return draft._fit_defaults(img, doc, "0.33.0", values, values, batch, None)


def test_the_recorded_grid_fits_the_record_it_was_read_with() -> None:
    values, batch, n, bad, _ = _fit(_setup()[2])
    assert n >= 40 and bad == [] and batch[0]["max_num_batched_tokens"] == 16384 and values["block_size"] == 16


def test_a_tier_whose_values_move_is_revalued() -> None:
    doc = copy.deepcopy(_setup()[2])
    for p in doc["rows"]:  # the >= 160 GiB devices resolve 32768 tokens instead of 16384
        if p["resolved"].get("max_num_batched_tokens") == 16384:
            p["resolved"]["max_num_batched_tokens"] = 32768
    _, batch, _, bad, _ = _fit(doc)
    assert bad == [] and [t["max_num_batched_tokens"] for t in batch] == [32768, 8192, 2048]


def test_a_new_tier_rule_is_left_unresolved() -> None:
    doc = copy.deepcopy(_setup()[2])
    for p in doc["rows"]:  # the H100 SXM alone drops to the small tier: a rule no recorded tier has
        if p["accelerator"] == "nvidia-h100-sxm" and "error" not in p["resolved"]:
            p["resolved"].update(max_num_batched_tokens=2048, max_num_seqs=256)
    _, batch, _, bad, _ = _fit(doc)
    assert bad and all("nvidia-h100-sxm" in b for b in bad)
    assert [t["max_num_batched_tokens"] for t in batch] == [16384, 8192, 2048]  # kept, not invented
