"""Issue 47: GPUs that real serve lines name are answered by the names users type, and an answer on one is sized
from that record's driver-reported bytes (memory_bytes), never from the marketed GB."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.util import RECORDS, run_kb

# what a user types -> the record it must reach (kb resolves --gpu case-insensitively by id and aliases)
TYPED = [
    ("a40", "nvidia-a40"), ("A40", "nvidia-a40"), ("nvidia-a40", "nvidia-a40"),
    ("a6000", "nvidia-rtx-a6000"), ("rtx-a6000", "nvidia-rtx-a6000"), ("RTX-A6000", "nvidia-rtx-a6000"),
    ("rtx-6000-ada", "nvidia-rtx-6000-ada"), ("6000-ada", "nvidia-rtx-6000-ada"),
    ("a30", "nvidia-a30"),
]


def record(rid: str) -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((RECORDS / "accelerators" / f"{rid}.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("typed", "rid"), TYPED)
def test_the_names_users_type_resolve(typed: str, rid: str) -> None:
    r = run_kb("query", "--gpu", typed, "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["query"]["gpu"] == rid


def test_the_a6000_alias_is_not_the_ada_card() -> None:
    """Two 48 GB workstation cards named 6000: the Ampere one (sm86, no FP8) and the Ada one (sm89)."""
    ampere, ada = record("nvidia-rtx-a6000"), record("nvidia-rtx-6000-ada")
    assert (ampere["architecture"], ada["architecture"]) == ("sm86", "sm89")
    assert not set(ampere["aliases"]) & set(ada["aliases"])


@pytest.mark.parametrize("engine", [None, "vllm", "sglang"])
def test_an_a40_answer_is_sized_from_its_record(engine: str | None) -> None:
    """The capacity in the answer is the record's memory_bytes (what the driver reports, not 48e9 or 48 GiB), and
    the KV budget is that capacity x utilization less the weights and the reserve the answer states."""
    args = ["query", "--gpu", "a40", "--ctx", "32k", "--kv", "fp8", "--model", "qwen3-8b", "--json"]
    if engine:
        args += ["--engine", engine]
    r = run_kb(*args)
    assert r.code == 0, r.err
    mem = json.loads(r.out)["memory"]
    want = record("nvidia-a40")["memory_bytes"]["value"]
    assert mem["capacity_bytes"] == want
    assert want not in (48 * 10**9, 48 * 2**30)
    if engine is None:  # the engine-neutral budget; the engines word their own (pool, mem_fraction_static)
        budget = int(mem["capacity_bytes"] * mem["utilization"])
        assert abs(mem["available_bytes"] - (budget - mem["weights_bytes"] - mem["reserve_bytes"])) <= 1
    assert mem["fits"] is True


def test_text_answer_on_a_new_card_fits_80_columns() -> None:
    """At 80 columns, no wider and no longer than the same answer on its sibling (the L40S: AD102, sm89)."""
    args = ["query", "--ctx", "32k", "--kv", "fp8", "--model", "qwen3-8b", "--engine", "vllm"]
    r = run_kb(*args, "--gpu", "rtx-6000-ada", env={"COLUMNS": "80"})
    sibling = run_kb(*args, "--gpu", "l40s", env={"COLUMNS": "80"})
    assert r.code == 0 and sibling.code == 0, r.err + sibling.err
    lines = r.out.splitlines()
    assert lines[0].startswith("verdict: ") and "nvidia-rtx-6000-ada" in lines[0]
    assert max(map(len, lines)) <= 80
    assert len(lines) <= len(sibling.out.splitlines())
