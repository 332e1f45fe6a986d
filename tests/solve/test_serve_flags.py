"""Serve-line parsers against the engines' own parsers: kbtool/solve/engines/flags.py reads the flag tables that
probes/_serve_flags.py recorded from each release's argparse (tests/data/<engine>/<release>/flags.json), and kb's
own tables (kbtool/solve/engines/*/args.py) are held to them here. Then the defects of issue 47 and the fuzz
targets: any pasted line parses or is refused with a UsageError naming what was typed; `kb query` never shows a
traceback and exits 2 on bad input."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbtool.errors import UsageError
from kbtool.solve.engines import flags
from kbtool.solve.engines.sglang import args as sglang_args
from kbtool.solve.engines.vllm import args as vllm_args
from tests.util import ROOT

DATA = ROOT / "tests" / "data"
VLLM_DEST = {"tp": "tensor_parallel_size", "pp": "pipeline_parallel_size", "dp": "data_parallel_size",
             "kv_cache_memory": "kv_cache_memory_bytes"}  # kb's field -> vLLM's dest where the names differ
KIND = {"int": {"int"}, "human": {"human_int"}, "float": {"float"}, "str": {"str"}, "switch": {None}}
CUSTOM = {"--cuda-graph-backend-decode", "--cuda-graph-backend-prefill"}  # SGLang parses these itself; kb: strings


def _doc(engine: str, release: str) -> dict[str, object]:
    return json.loads((DATA / engine / release / "flags.json").read_text())


def test_every_recorded_table_is_the_release_it_is_filed_under() -> None:
    found = sorted(DATA.glob("*/*/flags.json"))
    assert {p.parent.parent.name for p in found} == {"vllm", "sglang"}
    for p in found:
        d = json.loads(p.read_text())
        assert (d["engine"], d["release"]) == (p.parent.parent.name, p.parent.name)
        assert all(s["kind"] in ("switch", "value") for s in d["flags"].values())


def test_kbs_vllm_flags_are_vllms_with_its_types() -> None:
    t = flags.table("vllm", "--vllm-args")
    assert t is not None
    for flag, key in vllm_args._FLAGS.items():
        canon = t.canonical(flag)
        assert canon is not None, f"{flag} is not a flag of {t.name}"
        spec = t.spec(canon)
        assert spec["dest"] == VLLM_DEST.get(key, key), flag
        if key in vllm_args._HUMAN:
            assert spec["type"] == "human_int", flag
        elif key in vllm_args._INTS:
            assert spec["type"] == "int", flag
        elif key == "gpu_memory_utilization":
            assert spec["type"] == "float", flag
    for flag in vllm_args._SWITCHES:
        assert t.spec(flag)["kind"] == "switch"


@pytest.mark.parametrize("release", ["0.5.17", "0.5.23"])
def test_kbs_sglang_flags_are_sglangs_with_its_types(release: str) -> None:
    t = flags.FlagTable(_doc("sglang", release), "--sglang-args")
    newest = flags.table("sglang", "x")
    for flag, (key, kind) in sglang_args._FLAGS.items():
        canon = t.canonical(flag)
        if canon is None and newest is not None and release != newest.release:
            continue  # a flag the newer release added (--attn-dp-size is not in 0.5.17)
        assert canon is not None, f"{flag} is not a flag of {t.name}"
        spec = t.spec(canon)
        assert spec["dest"] == key, flag
        got = None if spec["kind"] == "switch" else spec["type"]
        assert got in KIND[kind] or flag in CUSTOM, f"{flag}: kb reads {kind}, SGLang {release} {got}"


def test_the_choices_kb_knew_are_each_a_recorded_releases() -> None:
    """kb's own list (used where no table is shipped) holds only values some recorded release accepts."""
    docs = [_doc("sglang", r) for r in ("0.5.17", "0.5.23")]
    for key, allowed in sglang_args._CHOICES.items():
        flag = next(f for f, (k, _) in sglang_args._FLAGS.items() if k == key)
        union = {c for d in docs for c in (d["flags"][flag]["choices"] or ())}  # type: ignore[index]
        assert set(allowed) <= union, f"{flag}: {sorted(set(allowed) - union)}"


# --- the defects (issue 47) and what the tables fixed --------------------------------------------------------------

def test_sglang_token_counts_take_si_suffixes_as_sglang_reads_them() -> None:
    """--max-total-tokens and --max-prefill-tokens are human_readable_int in 0.5.17 and 0.5.23: 100k was refused."""
    a = sglang_args.parse("--max-total-tokens 100k --max-prefill-tokens 16K --chunked-prefill-size 8092")
    assert a.fields["max_total_tokens"] == 100_000 and a.fields["max_prefill_tokens"] == 16_384
    assert a.fields["chunked_prefill_size"] == 8092


def test_sglang_prefixes_are_argparses() -> None:
    assert sglang_args.parse("--tp 2 --dp 2").fields["tp_size"] == 2
    with pytest.raises(UsageError) as e:  # --pp-size, --pp-async-batch-depth, --pp-max-micro-batch-size
        sglang_args.parse("--model-path m --pp 2")
    assert str(e.value).startswith("--sglang-args: ambiguous option: --pp could match --pp-async-batch-depth, "
                                   "--pp-max-micro-batch-size, --pp-size (SGLang 0.5.23's parser refuses it)")


def test_a_switch_does_not_take_the_model_as_its_value() -> None:
    assert vllm_args.parse("vllm serve --trust-remote-code Qwen/Qwen3-8B -tp 2").model == "Qwen/Qwen3-8B"
    a = sglang_args.parse("sglang serve --model-path Qwen/Qwen3-8B --enable-dp-attention --tp 2")
    assert a.fields["tp_size"] == 2 and a.fields["enable_dp_attention"] is True and not a.unknown


def test_a_second_positional_word_is_listed_not_dropped() -> None:
    """vllm-project/vllm#17822's line has a stray `gpu_memory_utilization=0.9` after the model: vLLM's serve parser
    takes one positional (model_tag, nargs="?", 0.34.0 vllm/entrypoints/common/cli_args.py:439-444) and exits 2 on
    another ("unrecognized arguments"); kb dropped the word without a trace, so the answer's list of what it did not
    consider was short by one."""
    t = flags.table("vllm", "--vllm-args")
    assert t is not None
    a = vllm_args.parse("vllm serve Qwen/Qwen3-32B -tp 2 gpu_memory_utilization=0.9 --max_model_len 32768")
    assert (a.model, a.tp, a.max_model_len, a.gpu_memory_utilization) == ("Qwen/Qwen3-32B", 2, 32768, None)
    assert a.ignored == [f"gpu_memory_utilization=0.9 (a second positional argument; {t.name}'s parser refuses it)"]
    assert a.refused == ["gpu_memory_utilization=0.9"]
    b = vllm_args.parse("python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-32B extra")
    assert b.model == "Qwen/Qwen3-32B" and b.ignored == ["extra (a positional argument besides --model; kb reads "
                                                         "--model)"] and not b.refused


@pytest.mark.parametrize("line", [
    "nohup python -m vllm.entrypoints.openai.api_server --model m -tp 2",  # vllm-project/vllm#17470
    "VLLM_LOGGING_LEVEL=DEBUG CUDA_VISIBLE_DEVICES=1 uv run vllm serve m -tp 2",  # vllm-project/vllm#33155
    "python -O -u -m vllm.entrypoints.openai.api_server --model=m -tp 2",  # vllm-project/vllm#2136
    "nohup sudo -E vllm serve m -tp 2",
])
def test_the_shells_wrappers_before_vllm_are_not_its_arguments(line: str) -> None:
    """nohup, `uv run` and the interpreter's own options (-O, -u) run the server and take none of its words; kb read
    `nohup` as the model and `python` as a stray argument."""
    a = vllm_args.parse(line)
    assert (a.model, a.tp, a.ignored, a.refused) == ("m", 2, [], [])


def test_an_sglang_line_pasted_without_its_interpreter() -> None:
    """sgl-project/sglang#4708 posts `CUDA_VISIBLE_DEVICES=0 -m sglang.launch_server --model-path ...`: the
    interpreter's name is missing before -m; the module after it is still the command, not a flag's value."""
    a = sglang_args.parse("CUDA_VISIBLE_DEVICES=0 -m sglang.launch_server --model-path m --chat-template=gemma-it")
    assert a.model == "m" and a.unknown == ["--chat-template"] and a.refused == []


def test_vllm_reads_underscores_and_prefixes_as_its_parser_does() -> None:
    a = vllm_args.parse("vllm serve m --max_num_seqs 512 --gpu-memory-util 0.8")
    assert (a.max_num_seqs, a.gpu_memory_utilization) == (512, 0.8)
    assert a.spelled["max_num_seqs"] == "--max_num_seqs"


def test_a_flag_the_release_lacks_is_named_with_the_releases_that_have_it() -> None:
    t = flags.table("vllm", "--vllm-args")
    assert t is not None and t.canonical("--calculate-kv-scales") is None  # in 0.19.1's parser, not in 0.34.0's
    a = vllm_args.parse("vllm serve m --calculate-kv-scales -tp 2")
    assert a.tp == 2 and len(a.ignored) == 1
    assert a.ignored[0] == (f"--calculate-kv-scales (not a flag of {t.name}; 0.19.1, 0.20.0 and 6 more to 0.26.0 "
                            "have it)")
    # --swap-space (V0's CPU swap) is in no recorded release's parser: every one refuses it
    assert vllm_args.parse("vllm serve m --swap-space 4").ignored == [f"--swap-space (not a flag of {t.name})"]
    # read as 0.24.0 reads it, the same flag is vLLM's own (a switch kb does not consider)
    assert vllm_args.parse("vllm serve m --calculate-kv-scales", "0.24.0").ignored == ["--calculate-kv-scales"]


@pytest.mark.parametrize(("line", "message"), [
    ("vllm serve m --seed x", "--vllm-args: --seed takes an integer; got 'x' (vLLM 0.34.0's parser refuses it)"),
    ("vllm serve m --dtype bf16", "--vllm-args: --dtype: invalid choice 'bf16' (vLLM 0.34.0's parser refuses it); "
     "no recorded release has it (0.19.1, 0.20.0 and 10 more to 0.34.0); a newer release may have it"),
])
def test_ignored_flags_are_still_read_with_the_engines_types(line: str, message: str) -> None:
    with pytest.raises(UsageError) as e:
        vllm_args.parse(line)
    assert e.value.args[0] == message


# --- the pinned release's table (issue 47: the newest was read whatever the release) ----------------------------

def test_the_table_is_the_releases_own_else_the_nearest_at_or_below() -> None:
    assert [flags.reads_with("vllm", r) for r in (None, "0.33.0", "0.30.5", "0.18.0", "0.99.0")] == [
        "0.34.0", "0.33.0", "0.28.0", "0.19.1", "0.34.0"]
    t = flags.table("vllm", "--vllm-args", "0.30.5")
    assert t is not None and (t.release, t.asked, t.exact) == ("0.28.0", "0.30.5", False)
    assert t.name == "vLLM 0.30.5 as read with 0.28.0's recorded parser, the nearest kb has"


def test_a_choice_of_an_older_release_is_refused_by_the_newer_ones_parser() -> None:
    """SGLang 0.5.17 takes --attention-backend cutlass_mla, 0.5.23's parser does not: kb read every line with
    0.5.23's table and let it through, then answered "cutlass_mla (SGLang 0.5.23's choice)"."""
    line = "--model-path m --attention-backend cutlass_mla"
    assert sglang_args.parse(line, "0.5.17").fields["attention_backend"] == "cutlass_mla"
    with pytest.raises(UsageError) as e:
        sglang_args.parse(line)
    assert e.value.args[0] == ("--sglang-args: --attention-backend: invalid choice 'cutlass_mla' (SGLang 0.5.23's "
                            "parser refuses it); 0.5.17 has it")
    assert e.value.fix is not None and e.value.fix.startswith("for SGLang 0.5.17, add --sglang 0.5.17; else choose "
                                                              "from triton, ")


def test_a_release_without_a_table_takes_what_a_recorded_release_takes() -> None:
    """vLLM 0.30.5 has no table: read with 0.28.0's, a choice 0.34.0 adds is not refused (kb cannot tell)."""
    assert "--all2all-backend" in vllm_args.parse("vllm serve m --all2all-backend mori", "0.30.5").ignored
    with pytest.raises(UsageError, match=r"'mori' \(vLLM 0.33.0's parser refuses it\); 0.19.1, 0.20.0 and 2 more "
                                         r"to 0.34.0 have it"):
        vllm_args.parse("vllm serve m --all2all-backend mori", "0.33.0")


@pytest.fixture(scope="module")
def img():  # type: ignore[no-untyped-def]
    from kbtool.query_cli import image

    return image()


def _solved(img, **kw):  # type: ignore[no-untyped-def]
    from kbtool.solve.request import build_query
    from kbtool.solve.solver import solve

    q = build_query(gpu="h100", **kw)
    solve(img, q)
    return q


@pytest.mark.parametrize("line", ["vllm serve qwen2.5-7b --dtype=float --max-model-len 512",
                                  "python -m sglang.launch_server --model-path qwen2.5-7b --dtype float"])
def test_float_is_the_engines_float32(img, line: str) -> None:  # type: ignore[no-untyped-def]
    """vLLM's --dtype choices (0.34.0 vllm/config/model.py:106, ModelDType) and SGLang's both take `float` for
    float32 (vllm/config/model.py:2428-2434 maps it to torch.float32); kb refused it as an unknown dtype
    (vllm-project/vllm#2140's line)."""
    q = _solved(img, **({"vllm_args": line} if line.startswith("vllm") else {"sglang_args": line}))
    assert q.dtype == "fp32"


def test_the_default_release_reads_the_line_with_its_own_table(img) -> None:  # type: ignore[no-untyped-def]
    """vLLM's default is the newest release with priority records (0.34.0 since its records), read with that
    release's own table; a line asked of 0.33.0 is read with 0.33.0's."""
    line = "vllm serve qwen3-8b --enable-extensible-kv-cache"
    q = _solved(img, vllm_args=line)
    assert q.release == "0.34.0" and q.line_read_with == "0.34.0"
    assert q.ignored == ["--enable-extensible-kv-cache"]
    old = _solved(img, vllm_args=line, vllm="0.33.0")
    assert old.release == "0.33.0" and old.line_read_with == "0.33.0"
    assert old.ignored == ["--enable-extensible-kv-cache (not a flag of vLLM 0.33.0; 0.34.0 has it)"]
    with pytest.raises(UsageError, match=r"'mori' \(vLLM 0.33.0's parser refuses it\)"):
        _solved(img, vllm_args="vllm serve qwen3-8b --all2all-backend mori", vllm="0.33.0")
    assert _solved(img, vllm_args="vllm serve qwen3-8b --all2all-backend mori").release == "0.34.0"
    assert _solved(img, vllm_args="vllm serve qwen3-8b --all2all-backend mori", lib=["vllm=0.34.0"]).release == "0.34.0"


@pytest.mark.parametrize("pin", [["--sglang", "0.5.17"], ["--lib", "sglang=0.5.17"]])
def test_kb_query_reads_the_line_as_the_pinned_release(pin: list[str]) -> None:
    from tests.util import run_kb

    line = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --attention-backend cutlass_mla"
    r = run_kb("query", "--gpu", "b200", "--sglang-args", line)
    assert r.code == 2 and "invalid choice 'cutlass_mla' (SGLang 0.5.23's parser refuses it); 0.5.17 has it" in r.err
    r = run_kb("query", "--gpu", "b200", *pin, "--sglang-args", line)
    assert r.code == 0, r.err
    assert "cutlass_mla (SGLang 0.5.17's choice)" in r.out


def test_max_num_seqs_values_vllm_takes_are_taken() -> None:
    for v in ("1", "256", "1024", "4096", "100000"):
        assert vllm_args.parse(f"vllm serve m --max-num-seqs {v}").max_num_seqs == int(v)
    with pytest.raises(UsageError, match="--max-num-seqs 0 must be at least 1"):
        vllm_args.parse("vllm serve m --max-num-seqs 0")


# --- fuzz targets ---------------------------------------------------------------------------------------------------

def _words(engine: str) -> list[str]:
    t = flags.table(engine, "x")
    assert t is not None
    known = sorted(t.flags)
    return [*known[::max(1, len(known) // 60)], "-tp", "--tp", "--pp", "--model", "--max_num_seqs"]


VALUES = st.sampled_from(["2", "0", "-1", "1e400k", "32k", "32K", "auto", "fp8", "bf16", "x", "", "0.9", "nan",
                          "--", "=", "'", "9" * 30, "Qwen/Qwen3-8B", "/mnt/m", "ünï", "\x00"])


def _line(engine: str) -> st.SearchStrategy[str]:
    word = st.one_of(st.sampled_from(_words(engine)), VALUES, st.text(max_size=12))
    joined = st.tuples(st.sampled_from(_words(engine)), VALUES).map(lambda fv: f"{fv[0]}={fv[1]}")
    return st.lists(st.one_of(word, joined), max_size=12).map(lambda ws: " ".join(ws))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_line("vllm"))
def test_fuzz_vllm_parser_parses_or_refuses(text: str) -> None:
    try:
        vllm_args.parse("vllm serve " + text)
    except UsageError as e:
        assert e.args[0].startswith("--vllm-args: ")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_line("sglang"))
def test_fuzz_sglang_parser_parses_or_refuses(text: str) -> None:
    try:
        sglang_args.parse("python -m sglang.launch_server " + text)
    except UsageError as e:
        assert e.args[0].startswith("--sglang-args: ")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(engine=st.sampled_from(["vllm", "sglang"]), data=st.data())
def test_fuzz_kb_query_exits_0_1_or_2_without_a_traceback(engine: str, data: st.DataObject) -> None:
    from tests.util import run_kb

    text = data.draw(_line(engine))
    r = run_kb("query", "--gpu", "h100", "--engine", engine, f"--{engine}-args", f"--model-path qwen3-8b {text}"
               if engine == "sglang" else f"serve qwen3-8b {text}")
    assert r.code in (0, 1, 2), r.err
    assert "Traceback" not in r.err and "Traceback" not in r.out


# --- the command as pasted (tests/data/serve-lines) -------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "CUDA_VISIBLE_DEVICES=0,1,2,3 python -m vllm.entrypoints.openai.api_server --model M --pipeline-parallel-size 4",
    "VLLM_LOGGING_LEVEL=DEBUG vllm serve M -pp 4",
    "/opt/venv/bin/python3.12 -m vllm.entrypoints.openai.api_server --model M -pp 4",
])
def test_environment_and_python_m_are_the_shells_not_the_engines(line: str) -> None:
    """vllm#10521 and vllm#40778 paste `NAME=value` before the command: kb read the assignment as the model."""
    a = vllm_args.parse(line)
    assert (a.model, a.pp, a.ignored) == ("M", 4, [])


def test_sglang_lines_after_environment_assignments() -> None:
    a = sglang_args.parse("CUDA_VISIBLE_DEVICES=7 python3.12 -m sglang.launch_server --model M --tp 2")
    assert a.fields == {"model_path": "M", "tp_size": 2} and a.unknown == []


def test_an_ambiguous_prefix_names_the_release_whose_parser_has_the_flag() -> None:
    """sglang#9704's --cuda-graph-max-bs is a flag of 0.5.17; 0.5.23 split it into -decode and -prefill, so its
    argparse refuses the prefix: kb says which release takes the line."""
    line = "--model-path m --cuda-graph-max-bs 256"
    assert "--cuda-graph-max-bs" in sglang_args.parse(line, "0.5.17").unknown
    with pytest.raises(UsageError) as e:
        sglang_args.parse(line)
    assert e.value.args[0] == ("--sglang-args: ambiguous option: --cuda-graph-max-bs could match "
                               "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill (SGLang 0.5.23's parser "
                               "refuses it); 0.5.17 has --cuda-graph-max-bs")
    assert e.value.fix == "for SGLang 0.5.17, add --sglang 0.5.17; else spell the flag out in full"


def test_an_ambiguous_prefix_no_release_has_says_which_options_it_could_be() -> None:
    """vllm#15042 passes --device cuda: 0.34.0's argparse refuses the prefix (--device-ids and
    --device-memory-utilization), and no recorded release has --device itself, so "spell it out" alone misleads."""
    with pytest.raises(UsageError) as e:
        vllm_args.parse("vllm serve M --device cuda", "0.34.0")
    assert e.value.fix == ("write the option you mean in full (--device-ids or --device-memory-utilization), or drop "
                           "--device: no recorded release has --device itself")


# ---- the one serve-line tokenizer (flags.split) is shlex.split, without importing shlex and re ------------------

_SHELL = st.lists(st.sampled_from(["vllm", "serve", " ", "  ", "\t", "\n", "\r", "'", '"', "\\", "-tp", "2", "=",
                                   "--model", "a b", "$HOME", "x\\ y", "'q q'", '"d \\" d"', "\\\\", "\x0b", "é",
                                   "#", "''", '""']), max_size=30).map("".join)


def _split(fn, text: str) -> tuple[str, object]:  # type: ignore[no-untyped-def]
    try:
        return "ok", fn(text)
    except ValueError as e:
        return "error", str(e)


@settings(max_examples=800, deadline=None)
@given(text=_SHELL)
def test_split_is_shlex_split(text: str) -> None:
    import shlex

    assert _split(flags.split, text) == _split(shlex.split, text)


@pytest.mark.parametrize("text", ["vllm serve m --kv-cache-dtype fp8", "CUDA_VISIBLE_DEVICES=0,1 python3 -m "
                                  "vllm.entrypoints.openai.api_server --model 'my model'", 'a "b\\"c" d\\ e',
                                  "'unclosed", "trailing\\", "", "   ", "''", "a '' b", "# not a comment"])
def test_split_examples(text: str) -> None:
    import shlex

    assert _split(flags.split, text) == _split(shlex.split, text)


def test_environment_and_python_prefixes_are_read_without_re() -> None:
    mods = ("vllm.entrypoints.openai.api_server",)
    line = ["A=1", "_B2=x", "/usr/bin/python3.12", "-m", mods[0], "--model", "m"]
    assert flags.command(line, mods) == ["--model", "m"]
    assert flags.command(["python", "-m", mods[0], "x"], mods) == ["x"]
    assert flags.command(["python3", "-m", mods[0], "x"], mods) == ["x"]
    for kept in (["1A=1", "vllm"], ["A-B=1", "vllm"], ["=1", "vllm"], ["pythonx", "-m", mods[0]],
                 ["python3.", "-m", mods[0]], ["python2", "-m", mods[0]], ["python3.1a", "-m", mods[0]]):
        assert flags.command(kept, mods) == kept


def test_a_container_wrapper_is_read_as_the_runtime_reads_it() -> None:
    """`docker run OPTIONS IMAGE ARGS` (as pasted in vllm#16343, vllm#8903, sglang#2587): the runtime's options
    and their values, and the image, are not the engine's; ARGS are the image's entrypoint's (vllm/vllm-openai:
    the server) or a command that replaces its CMD. Before, `docker run ... vllm/vllm-openai:TAG MODEL` took
    'docker' for the model."""
    mods = ("vllm.entrypoints.openai.api_server",)
    line = flags.split('sudo docker run --runtime nvidia --gpus all -v ~/.cache/hf:/root/.cache/hf --env "T=" '
                       "-p 8003:8000 --ipc=host --name phi4 --rm -it -d vllm/vllm-openai:latest --model m")
    assert flags.command(line, mods) == ["--model", "m"]
    assert flags.command(["docker", "run", "--gpus", '"device=0"', "-e", "A=1", "img:1", "m", "--tp", "2"],
                         mods) == ["m", "--tp", "2"]
    assert flags.command(["podman", "run", "--gpus=all", "img", "python3", "-m", mods[0], "--model", "m"],
                         mods) == ["--model", "m"]
    assert flags.command(["A=1", "docker", "run", "--", "img", "B=2", "m"], mods) == ["m"]
    for kept in (["docker", "ps"], ["docker", "run", "--rm"], ["vllm", "serve", "docker"], ["sudo"]):
        assert flags.command(kept, mods) == kept
    # sudo runs the rest as the command: `sudo -E -u me vllm serve m` is vLLM's line
    assert flags.command(["sudo", "-E", "-u", "me", "A=1", "vllm", "serve", "m"], mods) == ["vllm", "serve", "m"]
    assert flags.command(["sudo", "--", "python3", "-m", mods[0], "m"], mods) == ["m"]


def test_a_pasted_docker_line_names_the_model_after_the_image() -> None:
    from kbtool.solve.engines.sglang.args import parse as sglang_parse
    from kbtool.solve.engines.vllm.args import parse as vllm_parse

    got = vllm_parse("docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.10.0 Qwen/Qwen3-8B --max-model-len 8192")
    assert got.model == "Qwen/Qwen3-8B" and got.max_model_len == 8192 and not got.ignored
    got = vllm_parse("docker run -d --gpus all --shm-size 16g vllm/vllm-openai:latest --model Qwen/Qwen3-8B")
    assert got.model == "Qwen/Qwen3-8B" and not got.ignored  # -d and --shm-size are docker's
    sg = sglang_parse("docker run --gpus all --ipc=host lmsysorg/sglang:latest python3 -m sglang.launch_server "
                      "--model-path Qwen/Qwen3-8B --tp 2")
    assert sg.model == "Qwen/Qwen3-8B" and sg.fields["tp_size"] == 2 and not sg.unknown
