"""Every registered engine over one matrix of questions (issue 43): with and without a model, a pasted serve line,
every GPU class, each recorded release, bad input. Each answer is typed (Decision, Pick, Pool), its two halves
agree (a "yes" never rides on a pool whose start-up check fails), and `kb query` exits 0, 1 or 2, never 3. A stub
third engine (stub.py) runs through the same matrix on the fixture KB: adding an engine is its module and a
registry line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kbtool import query_cli
from kbtool.render.verdict import answer_summary
from kbtool.solve.answer import Answer
from kbtool.solve.decision import CASES, Decision
from kbtool.solve.engines import registry
from kbtool.solve.engines.base import Engine
from kbtool.solve.engines.results import PICK_STATES, Pick, Pool
from kbtool.solve.request import build_query
from kbtool.solve.solver import solve
from tests.solve.engines.stub import Stub
from tests.util import DATA

GPUS = ("h100", "a100", "b200", "mi300x", "l40s", "t4")
MODELS: tuple[tuple[str, ...], ...] = ((), ("--model", "llama-3.1-8b", "--ctx", "32k"),
                                       ("--model", "deepseek-v3", "--gpus", "8", "--ctx", "128k"),
                                       ("--model", "gemma-3-27b", "--ctx", "128k"),
                                       ("--model", "qwen3-next-80b-a3b", "--ctx", "4k", "--kv", "fp8"))
LINES = {"vllm": "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32k -tp 2 --enable-prefix-caching "
                 "--seed 1",
         "sglang": "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp 2 "
                   "--context-length 32768 --enable-metrics"}
BAD = (("--ctx", "0"), ("--gpu", "h1000"), ("--kv", "int3"), ("--gpus", "-2"))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = query_cli.main(argv)
    out = capsys.readouterr()
    assert "internal error" not in out.err and "Traceback" not in out.err, (argv, out.err)
    return code, out.out


def _typed(a: Answer) -> None:
    """The answer's parts are the contract's types, and its halves agree."""
    d = a.decision
    assert isinstance(d, Decision) and d.case in CASES and a.verdict == d.verdict
    assert d.pick is None or (isinstance(d.pick, Pick) and d.pick.state in PICK_STATES)
    if a.engine is not None:
        assert a.engine["state"] == d.pick.state and a.engine["label"] == d.pick.label  # type: ignore[union-attr]
    pool = a.memory.pool if a.memory is not None else None
    assert pool is None or isinstance(pool, Pool)
    if pool is not None and pool.starts is False:
        assert a.verdict == "no", answer_summary(a)
    if d.memory is not None and d.memory["fits"] is False:
        assert a.verdict in ("no", "conditional") or d.case == "HARDWARE", answer_summary(a)
    assert answer_summary(a).startswith(d.where)


@pytest.fixture(scope="module")
def shipped_image() -> Any:
    return query_cli.image()


@pytest.mark.parametrize("name", registry.names())
def test_every_engine_is_the_contract(name: str) -> None:
    eng = registry.ENGINES[name]
    assert isinstance(eng, Engine) and eng.name == name
    assert eng.line_flag() and eng.release_flag()  # kb query builds its options from these


@pytest.mark.parametrize("name", registry.names())
@pytest.mark.parametrize("gpu", GPUS)
def test_matrix(name: str, gpu: str, shipped_image: Any, capsys: pytest.CaptureFixture[str]) -> None:
    for model in MODELS:
        a = solve(shipped_image, build_query(gpu=gpu, engine=name, **_kw(model)))
        assert isinstance(a, Answer)
        _typed(a)
    code, out = _run(["--gpu", gpu, "--engine", name, "--json"], capsys)
    assert code == 0 and json.loads(out)["decision"]["case"] in CASES


def _kw(args: tuple[str, ...]) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        kw[flag.lstrip("-").replace("-", "_")] = int(value) if flag == "--gpus" else value
    return kw


@pytest.mark.parametrize("name", registry.names())
def test_each_recorded_release_and_a_line(name: str, shipped_image: Any, capsys: pytest.CaptureFixture[str]) -> None:
    eng = registry.ENGINES[name]
    flag = eng.release_flag()
    assert flag is not None
    known = {"vllm": ("0.19.1", "0.24.0", "0.33.0", "0.34.0"), "sglang": ("0.5.17", "0.5.23")}[name]
    for release in known:
        a = solve(shipped_image, build_query(gpu="h100", model="llama-3.1-8b", ctx="32k", engine=name,
                                             **{name: release}))
        _typed(a)  # type: ignore[arg-type]
        assert a.query["release"] == release  # type: ignore[union-attr]
    code, out = _run(["--gpu", "h100", "--engine", name, eng.line_flag() or "", LINES[name], "--json"], capsys)
    got = json.loads(out)
    assert code == 0 and got["query"]["gpus"] == 2 and got["query"]["ignored"]  # unknown flags kept, for every engine
    code, text = _run(["--gpu", "h100", eng.line_flag() or "", LINES[name]], capsys)
    assert code == 0 and "serve-line flags not considered: " in text  # and shown in the text, for every engine


@pytest.mark.parametrize("name", [*registry.names(), "vllm,sglang"])
@pytest.mark.parametrize("bad", BAD)
def test_bad_input_is_exit_2(name: str, bad: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _run(["--gpu", "h100", "--engine", name, *bad], capsys)
    assert code == 2


def test_a_comparison_without_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(["--gpu", "h100", "--engine", ",".join(registry.names()), "--json"], capsys)
    got = json.loads(out)
    assert code == 0 and [d["engine"] for d in got["digest"]] == registry.names()


@pytest.fixture
def stub_kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture KB with one backend of the stub engine, and the stub in the registry: the two things a new
    engine adds besides its tests."""
    root = tmp_path / "kb"
    shutil.copytree(DATA / "kb_fixture", root)
    (root / "engine-backends" / "trt-gqa.yaml").write_text(
        "id: trt-gqa\nkind: engine-backend\nname: trt-gqa\nengine: trtllm\nbackend_name: TRT_GQA\nkernels:\n"
        "- k-gqa\nattention:\n- mha\n- gqa\nsources:\n- type: seed\n  seed: fixture.txt\n")
    monkeypatch.setitem(registry.ENGINES, "trtllm", Stub())
    return root


def test_a_stub_engine_runs_the_same_matrix(stub_kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = ["--kb", str(stub_kb), "--no-cache"]
    code, out = _run(["--gpu", "hop", "--engine", "trtllm", "--head-dim", "128", "--json", *kb], capsys)
    got = json.loads(out)
    assert code == 0 and got["engine"]["selected"] == "trt-gqa" and got["engine"]["label"] == "TensorRT-LLM 1.0"
    assert got["verdict"] == got["decision"]["verdict"]
    code, out = _run(["--gpu", "hop", "--model", "fx-llama-70b", "--ctx", "8k", "--trtllm", "2.0", "--json", *kb],
                     capsys)
    got = json.loads(out)
    assert code == 0 and got["query"]["release"] == "2.0" and got["memory"] is None
    code, out = _run(["--gpu", "hop", "--trtllm-args", "trtllm-serve fx-llama-70b --tp_size 2 --kv_cache_free 0.9",
                      *kb], capsys)
    assert code == 0 and "TensorRT-LLM 1.0 selects TRT_GQA" in out and "--kv_cache_free" in out
    code, _ = _run(["--gpu", "hop", "--trtllm-args", "trtllm-serve m --tp_size two", *kb], capsys)
    assert code == 2
    code, out = _run(["--help"], capsys)
    assert "--trtllm-args CMD" in out  # the query options come from the registry


def test_an_engine_missing_a_method_is_refused() -> None:
    class Half(Engine):  # no pick, no memory, ...
        name, label, options = "half", "Half", ()

    with pytest.raises(TypeError, match="abstract"):
        Half()  # type: ignore[abstract]
