"""The query image: built from records, through marshal and back, it answers exactly as the records do."""

from __future__ import annotations

import marshal

import pytest

from kbtool.solve import image, imagebuild
from kbtool.solve.answer import to_json
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from tests.util import DATA, ROOT, load_kb

QUERIES = [
    {"gpu": "h100", "ctx": "128k", "kv": "fp8"},
    {"gpu": "h200", "ctx": "16k", "model": "llama-3.1-70b", "engine": "vllm"},
    {"gpu": "b200", "model": "deepseek-v3", "engine": "vllm", "kv": "bf16"},
    {"ctx": "32k", "kv": "fp8", "model": "qwen3-next-80b-a3b"},
    {"gpu": "h100", "head_dim": 256, "lib": ["flashinfer=0.6.18"], "phase": "decode"},
]


@pytest.mark.parametrize("kw", QUERIES, ids=[str(i) for i in range(len(QUERIES))])
def test_image_round_trip_answers_like_the_records(kw: dict[str, object]) -> None:
    kb = load_kb(ROOT / "records")
    loaded = image.Image.load(imagebuild.dump(imagebuild.build(kb)))
    assert loaded is not None
    want = to_json(solve(kb, build_query(**kw)))  # type: ignore[arg-type]
    assert to_json(solve(loaded, build_query(**kw))) == want  # type: ignore[arg-type]


def test_image_keeps_what_the_solver_reads() -> None:
    kb = load_kb(DATA / "kb_fixture")
    data = imagebuild.build(kb)
    img = image.Image(data)
    assert [k.id for k in img.kernels] == sorted(r.id for r in kb if r.kind == "kernel")
    claims = img.all_claims()
    assert sorted(c.id for c in claims) == sorted(r.id for r in kb if r.kind == "claim")
    assert img.resolve("HOP", "accelerator", "--gpu") == "gpu-hopper"


def test_foreign_or_broken_bytes_are_not_an_image() -> None:
    assert image.Image.load(b"not marshal") is None
    assert image.Image.load(marshal.dumps({"version": image.IMAGE_VERSION + 1})) is None
    assert image.Image.load(marshal.dumps([1, 2])) is None
