"""kb graph: neighbors, why, impact and export, on the fixture KB and the shipped KB."""

from __future__ import annotations

import io
import json

import networkx as nx
import pytest

from kbtool.errors import UsageError
from kbtool.graph import build
from kbtool.kb import KB
from kbtool.solve.request import build_query
from kbtool.views.graphview import export, neighbors, why
from kbtool.views.impact import flipped, impact
from tests.util import DATA, run_kb

FIX = str(DATA / "kb_fixture")


def test_neighbors_depth(fx: KB) -> None:
    one = neighbors(fx, "k-prefill", 1)
    ids = {n["id"]: n["distance"] for n in one["nodes"]}
    assert ids["k-prefill"] == 0 and ids["k-prefill-hd"] == 1 and ids["k-prefill-no-fp8"] == 1
    assert "ev-fixture" not in ids
    two = {n["id"] for n in neighbors(fx, "k-prefill", 2)["nodes"]}
    assert "ev-fixture" in two  # claim -> evidence, two hops away
    assert {"from": "k-prefill-hd", "to": "k-prefill", "rel": "subject"} in one["edges"]
    with pytest.raises(UsageError):
        neighbors(fx, "k-prefill", 0)


def test_why_rejected_names_the_claim(fx: KB) -> None:
    d = why(fx, "k-gqa", build_query(gpu="gpu-blackwell", head_dim=128, kv="bf16"))
    assert d["status"] == "disputed"  # the sm90 gate is disputed: it decides, but does not reject
    roles = [(s["role"], s["id"]) for s in d["chain"]]
    assert roles[:3] == [("accelerator", "gpu-blackwell"), ("architecture", "sm100"), ("kernel", "k-gqa")]
    assert ("disputed", "k-gqa-requires-sm90") in roles


def test_why_admitted_shows_refuted_and_passed(fx: KB) -> None:
    d = why(fx, "k-prefill", build_query(gpu="gpu-hopper", head_dim=128, kv="fp8", phase="prefill"))
    assert d["status"] == "ok"
    roles = {(s["role"], s["id"]) for s in d["chain"]}
    assert ("refuted, not enforced", "k-prefill-no-fp8") in roles
    assert ("passed", "k-prefill-hd") in roles
    with pytest.raises(UsageError):
        why(fx, "k-prefill", build_query(head_dim=128))


def test_flip_does_not_touch_the_original(fx: KB) -> None:
    other, status = flipped(fx, fx.resolve("k-prefill-no-fp8"))  # type: ignore[arg-type]
    assert status == "unverified"
    assert other.by_id["k-prefill-no-fp8"].verification.status == "unverified"  # type: ignore[attr-defined]
    assert fx.by_id["k-prefill-no-fp8"].verification.status == "refuted"  # type: ignore[attr-defined]


def test_impact_fixture(fx: KB) -> None:
    d = impact(fx, "k-prefill-no-fp8")
    assert d["kernels"] == ["k-prefill"] and d["then"] == "enforced"
    cells = {(c["gpu"], c["kv"], c["head_dim"]) for c in d["changes"]}
    # enforcing "kv bf16/fp16 only" rejects k-prefill for the three other KV dtypes, but not at head dim 512,
    # where k-prefill-hd already rejects it
    expect = {(g, kv, hd) for g in ("gpu-blackwell", "gpu-hopper") for kv in ("fp8_e4m3", "fp8_e5m2", "nvfp4")
              for hd in (64, 128, 256)}
    assert cells == expect
    assert all(c["kernels"] == [{"id": "k-prefill", "before": "ok", "after": "rejected"}] for c in d["changes"])
    none = impact(fx, "k-gqa-old-bug", kvs=("bf16",), head_dims=(128,))
    assert none["changes"] == [] or none["kernels"]


def test_impact_engine_backend_claim(fx: KB) -> None:
    d = impact(fx, "eng-gqa-block")
    assert d["changes"] == []  # an engine-backend claim cannot change engine-less answers
    assert all(c["engine"] == "vllm" for c in d["engine_changes"])


def test_impact_fa4_requires_blackwell_on_shipped_kb(shipped: KB) -> None:
    d = impact(shipped, "fa4-requires-blackwell")
    assert d["status"] == "refuted" and d["then"] == "enforced"
    assert d["kernels"] == ["flash-attention-4"]
    gpus = set(d["gpus"])
    assert {"nvidia-h100-sxm", "nvidia-h200-sxm", "nvidia-a100-80gb-sxm"} <= gpus
    assert not gpus & {"nvidia-b200", "nvidia-gb200", "nvidia-b300"}  # Blackwell keeps FA-4 either way
    h100 = [c for c in d["changes"] if c["gpu"] == "nvidia-h100-sxm" and c["kv"] == "bf16" and c["head_dim"] == 128]
    assert h100 and h100[0]["kernels"][0]["after"] == "rejected"


def test_export_formats(fx: KB) -> None:
    g = build(fx)
    gml = nx.read_graphml(io.BytesIO(export(fx, "graphml").encode()))
    assert gml.number_of_nodes() == g.number_of_nodes() and gml.number_of_edges() == g.number_of_edges()
    dot = export(fx, "dot")
    assert dot.startswith("digraph kb {") and dot.count(" -> ") == g.number_of_edges()
    mer = export(fx, "mermaid")
    assert mer.startswith("graph LR") and mer.count(" -->|") == g.number_of_edges()
    with pytest.raises(UsageError):
        export(fx, "svg")


def test_cli_graph() -> None:
    # one cell per GPU: the whole grid on the shipped KB is test_impact_fa4_requires_blackwell_on_shipped_kb's
    r = run_kb("graph", "impact", "fa4-requires-blackwell", "--kv", "bf16", "--head-dim", "128")
    assert r.code == 0, r.err
    assert "GPUs x kv bf16 x head dim 128" in r.out
    assert "kernels that change: flash-attention-4" in r.out
    assert "nvidia-h100-sxm: flash-attention-4 disputed -> rejected" in r.out
    w = run_kb("graph", "why", "fa4", "--gpu", "h100", "--kv", "bf16", "--head-dim", "128", "--json")
    assert w.code == 0, w.err
    chain = json.loads(w.out)["chain"]
    assert any(s["id"] == "fa4-requires-blackwell" and s["role"] == "refuted, not enforced" for s in chain)
    n = run_kb("graph", "neighbors", "k-gqa", "--kb", FIX, "--depth", "1")
    assert n.code == 0 and "k-gqa-head-dim" in n.out
    e = run_kb("graph", "export", "--kb", FIX, "--format", "mermaid")
    assert e.code == 0 and e.out.startswith("graph LR")
    bad = run_kb("graph", "why", "fa4", "--gpu", "h1000")
    assert bad.code == 2 and "did you mean" in bad.err
