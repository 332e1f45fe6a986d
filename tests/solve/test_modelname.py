"""`--model` as users paste it: paths from another machine read by their folder names, Hugging Face ids whose
config is nowhere here, quantization endings (kbtool/solve/modelname.py, kbtool/solve/modelref.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbtool.solve.modelname import folders, is_pathlike, model_names, quant_ending, repo_ids, stripped, untuned
from tests.util import ROOT, hf_cache, run_kb

OFFLINE = {"KB_NO_CACHE": "1", "HF_HUB_OFFLINE": "1"}
SHA = "89abcdef0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(("name", "ids", "names"), [
    ("/mnt/data/models/Qwen3-235B-A22B", ["models/Qwen3-235B-A22B"], ["Qwen3-235B-A22B"]),
    ("/root/hf_model/Qwen/Qwen2-72B-Instruct-GPTQ-Int4", ["Qwen/Qwen2-72B-Instruct-GPTQ-Int4"],
     ["Qwen2-72B-Instruct-GPTQ-Int4"]),
    ("Qwen_Qwen3-30B-A3B-FP8/", ["Qwen/Qwen3-30B-A3B-FP8"], ["Qwen3-30B-A3B-FP8", "Qwen_Qwen3-30B-A3B-FP8"]),
    # ModelScope writes '.' as '___' (vllm#13124)
    ("/home/lzh/llm_model/Qwen/Qwen2___5-VL-72B-Instruct", ["Qwen/Qwen2.5-VL-72B-Instruct"],
     ["Qwen2.5-VL-72B-Instruct"]),
    # a placeholder the poster left for their own folder (vllm#17327): no Hub id has '<' or '>', so it is a path
    ("<PATH>/nytopop_Qwen3-30B-A3B.w4a16", ["<PATH>/nytopop_Qwen3-30B-A3B.w4a16", "nytopop/Qwen3-30B-A3B.w4a16"],
     ["nytopop_Qwen3-30B-A3B.w4a16", "Qwen3-30B-A3B.w4a16"]),
    (f"/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/{SHA}",
     ["Qwen/Qwen3-8B", "hub/models--Qwen--Qwen3-8B"], ["Qwen3-8B", "models--Qwen--Qwen3-8B"]),
])
def test_a_path_spells_ids_and_names(name: str, ids: list[str], names: list[str]) -> None:
    parts = folders(name)
    assert is_pathlike(name)
    assert repo_ids(parts) == ids and model_names(parts) == names


@pytest.mark.parametrize("name", ["qwen3-8b", "Qwen/Qwen3-8B", "llama-3.1-70b"])
def test_ids_and_hub_ids_are_not_paths(name: str) -> None:
    assert not is_pathlike(name)


NAMES = {"qwen3-30b-a3b": "qwen3-30b-a3b", "qwen/qwen3-30b-a3b": "qwen3-30b-a3b", "llama-3.3-70b": "llama-3.3-70b",
         "meta-llama/llama-3.3-70b-instruct": "llama-3.3-70b",
         "nvidia/llama-3_3-nemotron-super-49b-v1": "llama-3.3-nemotron-super-49b"}


@pytest.mark.parametrize(("name", "want"), [
    ("Qwen3-30B-A3B-FP8", ("qwen3-30b-a3b", "Qwen3-30B-A3B-FP8", "fp8", "-FP8")),
    ("Qwen3-30B-A3B-GPTQ-Int4", ("qwen3-30b-a3b", "Qwen3-30B-A3B-GPTQ-Int4", "int4", "-GPTQ-Int4")),
    ("Qwen3-30B-A3B-AWQ", ("qwen3-30b-a3b", "Qwen3-30B-A3B-AWQ", "int4", "-AWQ")),
    ("Llama-3.3-70B-Instruct-FP8-dynamic", ("llama-3.3-70b", "Llama-3.3-70B-Instruct-FP8-dynamic", "fp8",
                                            "-FP8-dynamic")),
    ("Qwen3-30B-A3B-bnb-4bit", ("qwen3-30b-a3b", "Qwen3-30B-A3B-bnb-4bit", None, "-bnb-4bit")),
    # Neural Magic / Red Hat AI's endings (vllm#10521, vllm#7714): int8 weights for w8a8 and w8a16, int4 for w4a16
    ("Llama-3.3-70B-Instruct-quantized.w8a8", ("llama-3.3-70b", "Llama-3.3-70B-Instruct-quantized.w8a8", "int8",
                                               "-quantized.w8a8")),
    ("Llama-3.3-70B-Instruct-quantized.w4a16", ("llama-3.3-70b", "Llama-3.3-70B-Instruct-quantized.w4a16", "int4",
                                                "-quantized.w4a16")),
    # endings of several words (sglang#4895, vllm#26646) and words that say no format alone
    ("Qwen3-30B-A3B-int4-awq", ("qwen3-30b-a3b", "Qwen3-30B-A3B-int4-awq", "int4", "-int4-awq")),
    ("Qwen3-30B-A3B-Instruct-int4-mixed-AutoRound", ("qwen3-30b-a3b", "Qwen3-30B-A3B-Instruct-int4-mixed-AutoRound",
                                                     "int4", "-int4-mixed-AutoRound")),
    ("Qwen3-30B-A3B-GPTQ-Int8", ("qwen3-30b-a3b", "Qwen3-30B-A3B-GPTQ-Int8", "int8", "-GPTQ-Int8")),
    ("Qwen3-30B-A3B-unsloth-bnb-4bit", ("qwen3-30b-a3b", "Qwen3-30B-A3B-unsloth-bnb-4bit", None,
                                        "-unsloth-bnb-4bit")),
    ("Qwen3_30B_A3B_AWQ", ("qwen3-30b-a3b", "Qwen3_30B_A3B_AWQ", "int4", "_AWQ")),
    # a name whose own spelling has '_' (NVIDIA's Llama-3_3-Nemotron-Super-49B-v1, vllm#15664) keeps it
    ("Llama-3_3-Nemotron-Super-49B-v1-4bit-GPTQ", ("llama-3.3-nemotron-super-49b",
                                                   "Llama-3_3-Nemotron-Super-49B-v1-4bit-GPTQ", "int4", "-4bit-GPTQ")),
    ("Qwen3-30B-A3B-dynamic", None),
    # a 16-bit re-release of a checkpoint published quantized (vllm#17470's DeepSeek-R1-BF16, unsloth's
    # gpt-oss-20b-BF16): the ending names the weights' format as the quantized ones do
    ("Qwen3-30B-A3B-BF16", ("qwen3-30b-a3b", "Qwen3-30B-A3B-BF16", "bf16", "-BF16")),
    ("Qwen3-30B-A3B-fp16", ("qwen3-30b-a3b", "Qwen3-30B-A3B-fp16", "fp16", "-fp16")),
    # an ending joined by '.' (nytopop's Qwen3-30B-A3B.w4a16, vllm#17327); a version's '.' is no ending
    ("Qwen3-30B-A3B.w4a16", ("qwen3-30b-a3b", "Qwen3-30B-A3B.w4a16", "int4", ".w4a16")),
    ("Llama-3.3-70B-Instruct.quantized", None),
    # tuning endings and a dated re-release, one after another, with no quantization ending
    ("Llama-3.3-70B-Instruct-chat-hf", ("llama-3.3-70b", "Llama-3.3-70B-Instruct-chat-hf", None, None)),
    # a year-and-month release (-2507) is a new version, not the record's config (release_at): no match; a
    # month-and-day checkpoint (-0528) still is the record's
    ("Qwen3-30B-A3B-2507", None),
    ("Qwen3-30B-A3B-Instruct-2507-FP8", None),
    ("Qwen3-30B-A3B-0528", ("qwen3-30b-a3b", "Qwen3-30B-A3B-0528", None, None)),
    ("Qwen3-31B-A3B-FP8", None),
    ("Qwen3-30B-A3B", None),  # a name that is a record needs no stripping: exact() takes it
])
def test_a_quantization_ending_is_taken_off_and_read(name: str, want: tuple[str, ...] | None) -> None:
    assert stripped(NAMES, [name]) == want


@pytest.mark.parametrize(("name", "want"), [
    ("qwen3-8b", None), ("x-dynamic", None), ("fp8", None), ("m-fp8-dynamic", (1, "fp8")), ("m-gptq-8bit", (1, "int8")),
    ("m-gptq-4bit", (1, "int4")), ("m-4bit", (1, None)), ("m-gguf", (1, None)), ("m-w8a8-fp8", (1, "fp8")),
])
def test_quant_ending_reads_every_word(name: str, want: tuple[int, str | None] | None) -> None:
    assert quant_ending(name) == want


def test_untuned_takes_endings_off_one_by_one() -> None:
    assert untuned("llama-2-7b-chat-hf") == ["llama-2-7b-chat-hf", "llama-2-7b-chat", "llama-2-7b"]
    assert untuned("deepseek-r1-0528") == ["deepseek-r1-0528", "deepseek-r1"]
    assert untuned("qwen3-8b") == ["qwen3-8b"] and untuned("x-1234") == ["x-1234"]  # 1234: not a date
    assert untuned("qwen3-30b-a3b-instruct-2507") == ["qwen3-30b-a3b-instruct-2507"]  # YYMM: a new version


@pytest.mark.parametrize("model", [
    "/mnt/general/models/Qwen3-30B-A3B-Instruct-2507-FP8",  # vllm#22306's folder
    "Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-30B-A3B-Thinking-2507-FP8",
    "Qwen/Qwen3-235B-A22B-Instruct-2507", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen3-30B-A3B-Instruct-2507",
])
def test_a_2507_release_is_not_answered_from_the_original_record(model: str) -> None:
    """Qwen3's 2507 releases have a 262,144-token native context (the Qwen3-30B-A3B-Instruct-2507 model card) where
    the records of Qwen3-30B-A3B and Qwen3-235B-A22B hold their originals' 40,960: answered from those records, kb
    refused vllm#22306's --max-model-len 64000 for a model that takes it. Offline with no config of the release, kb
    now refuses and names the record it will not assume and the config to fetch."""
    r = run_kb("query", "--gpu", "h100", "--gpus", "8", "--model", model, "--vllm-args",
               f"serve {model} --max-model-len 64000", "--json", env=OFFLINE)
    assert r.code == 2, r.out
    err = r.err
    assert "-2507 release of a model kb records as qwen3-" in err and "40,960 tokens of context" in err, err
    assert "\n  fix: `hf download " in err and "-2507" in err.split("fix:")[1], err


def test_a_2507_release_answers_from_its_own_config_in_the_cache(tmp_path: Path) -> None:
    """With the release's own config.json in the Hugging Face cache, the name is read from it (its context), not
    from the original's record."""
    cfg = json.loads((ROOT / "tests/data/hf-configs/qwen3-30b-a3b/config.json").read_text(encoding="utf-8"))
    cfg["max_position_embeddings"] = 262144  # the release's context; everything else as the original's
    hf_cache(tmp_path, "Qwen/Qwen3-30B-A3B-Instruct-2507", {"config.json": json.dumps(cfg).encode()})
    r = run_kb("query", "--gpu", "h100", "--gpus", "8", "--model", "Qwen/Qwen3-30B-A3B-Instruct-2507",
               "--vllm-args", "serve Qwen/Qwen3-30B-A3B-Instruct-2507 --max-model-len 64000", "--json",
               env={**OFFLINE, "HF_HUB_CACHE": str(tmp_path)})
    assert r.code == 0, r.err
    a = json.loads(r.out)
    assert a["query"]["model"] != "qwen3-30b-a3b" and a["verdict"] == "yes", a["verdict"]


def _query(model: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    r = run_kb("query", "--gpu", "h100", "--gpus", "4", "--ctx", "32k", "--model", model, "--json",
               env={**OFFLINE, **(env or {})})
    return r.code, (json.loads(r.out) if r.code == 0 else {}), r.err


def test_a_path_from_another_machine_is_its_folder_name() -> None:
    code, a, err = _query("/mnt/data/models/Qwen3-235B-A22B")
    assert code == 0, err
    assert a["query"]["model"] == "qwen3-235b-a22b"
    assert a["assumed"]["model"] == ("qwen3-235b-a22b, recognised from the folder name 'Qwen3-235B-A22B' "
                                     "(/mnt/data/models/Qwen3-235B-A22B does not exist here; --model ID overrides)")


def test_a_re_upload_under_another_org_is_its_recorded_model_offline() -> None:
    """unsloth/, NousResearch/, RedHatAI/ publish the same checkpoint under the original NAME (sglang#1030,
    vllm#8879): offline, with no config here, the record whose ORG/NAME alias has that NAME answers, and says so."""
    code, a, err = _query("NousResearch/Meta-Llama-3.1-8B-Instruct")
    assert code == 0, err
    assert a["query"]["model"] == "llama-3.1-8b"
    assert a["assumed"]["model"].startswith(
        "llama-3.1-8b, recognised from the name NousResearch/Meta-Llama-3.1-8B-Instruct as its alias "
        "meta-llama/meta-llama-3.1-8b-instruct under another organisation: its config.json is neither in the "
        "Hugging Face cache nor fetched")
    code, a, err = _query("deepseek-ai/DeepSeek-R1-0528")  # a dated re-release: the record's shapes
    assert code == 0, err
    assert a["query"]["model"] == "deepseek-r1"


@pytest.mark.parametrize(("model", "record"), [
    ("/root/autodl-tmp/deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "qwen2.5-14b"),  # vllm#13061, an alias
    ("./DeepSeek-R1-Distill-Llama-70B", "llama-3.3-70b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "llama-3.1-8b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek-r1-distill-qwen-7b"),  # its own record: rope_theta 1e4
])
def test_a_distill_resolves_to_the_record_of_its_shapes(model: str, record: str) -> None:
    code, a, err = _query(model)
    assert code == 0, err
    assert a["query"]["model"] == record


def _weights_as(model: str, weights: str) -> int:
    """The weight bytes `_query`'s question gives for a record id with `--weights` set."""
    r = run_kb("query", "--gpu", "h100", "--gpus", "4", "--ctx", "32k", "--model", model, "--weights", weights,
               "--json", env=OFFLINE)
    return int(json.loads(r.out)["memory"]["weights_bytes"])


def test_a_quantized_folder_sizes_the_weights_at_its_format() -> None:
    code, a, err = _query("~/.cache/huggingface/local/Llama-3.3-70B-Instruct-FP8")
    assert code == 0, err
    assert a["query"]["model"] == "llama-3.3-70b-fp8" and a["memory"]["weights_dtype"] == "fp8"
    assert a["memory"]["weights_bytes"] == _weights_as("llama-3.3-70b", "fp8")  # as --weights fp8 says
    assert a["assumed"]["model"] == (
        "llama-3.3-70b with fp8 weights (the name's '-FP8'), recognised from the folder name "
        "'Llama-3.3-70B-Instruct-FP8' (~/.cache/huggingface/local/Llama-3.3-70B-Instruct-FP8 does not exist here; "
        "--model ID overrides)")


def test_a_16_bit_re_release_of_a_quantized_model_sizes_its_weights_at_16_bits() -> None:
    """vllm-project/vllm#17470 serves /models/DeepSeek-R1-BF16 on 16 GPUs: DeepSeek-R1 upcast to bf16, twice the
    bytes of the fp8 checkpoint kb records. kb refused the folder name (no quantization ending it knew)."""
    code, a, err = _query("/models/DeepSeek-R1-BF16")
    assert code == 0, err
    assert a["query"]["model"] == "deepseek-r1-bf16" and a["memory"]["weights_dtype"] == "bf16"
    assert a["memory"]["weights_bytes"] == _weights_as("deepseek-r1", "bf16")  # as --weights bf16 says
    assert a["assumed"]["model"].startswith("deepseek-r1 with bf16 weights (the name's '-BF16'), recognised from")


def test_org_underscore_name_and_a_hub_id_with_no_config_here() -> None:
    code, a, err = _query("Qwen_Qwen3-14B-FP8/")
    assert code == 0, err
    assert a["query"]["model"] == "qwen3-14b-fp8" and a["memory"]["weights_dtype"] == "fp8"
    code, a, err = _query("Qwen/Qwen3-14B-FP8")
    assert code == 0, err
    assert a["assumed"]["model"] == (
        "qwen3-14b with fp8 weights (the name's '-FP8'), recognised from the name Qwen/Qwen3-14B-FP8: its "
        "config.json is neither in the Hugging Face cache nor fetched (`hf download Qwen/Qwen3-14B-FP8 "
        "config.json` gives kb the exact one)")


@pytest.mark.parametrize(("model", "record", "said"), [
    ("Qwen_Qwen3-30B-A3B-FP8/", "qwen3-30b-a3b-fp8", "the folder name 'Qwen/Qwen3-30B-A3B-FP8'"),
    ("/mnt/models/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b-fp8", "the folder name 'Qwen3-235B-A22B-FP8'"),
    ("/data/nvidia/Qwen3-235B-A22B-NVFP4", "qwen3-235b-a22b-nvfp4", "the folder name 'nvidia/Qwen3-235B-A22B-NVFP4'"),
])
def test_a_quantized_name_takes_the_quantized_record_where_kb_has_one(model: str, record: str, said: str) -> None:
    """The record of the quantized release (its own config: what it quantizes, its ModelOpt file), not the base
    model with its weights recast."""
    code, a, err = _query(model)
    assert code == 0, err
    assert a["query"]["model"] == record
    assert a["assumed"]["model"].startswith(f"{record}, recognised from {said} ")
    code, b, err = _query(record)
    assert code == 0, err
    assert a["memory"]["weights_bytes"] == b["memory"]["weights_bytes"]


def test_a_folder_name_the_hugging_face_cache_holds_reads_its_config(tmp_path: Path) -> None:
    cfg = ROOT / "probes" / "vllm_boot" / "models" / "qwen3-8b" / "config.json"
    hf_cache(tmp_path, "acme/Tiny-8B", {"config.json": cfg.read_bytes()}, commit=SHA)
    code, a, err = _query("/data/weights/Tiny-8B/", env={"HF_HUB_CACHE": str(tmp_path)})
    assert code == 0, err
    assert a["query"]["model"] == "tiny-8b"
    assert a["assumed"]["model"] == (
        f"tiny-8b from acme/Tiny-8B config.json at commit {SHA[:12]}, from the Hugging Face cache {tmp_path}, "
        "recognised from the folder name 'Tiny-8B' (/data/weights/Tiny-8B/ does not exist here; --model ID "
        "overrides); weights estimated as parameters x bytes (offline: the Hub's safetensors headers were not "
        "read)")


def test_a_path_nothing_matches_says_what_was_tried(tmp_path: Path) -> None:
    r = run_kb("query", "--gpu", "h100", "--model", "/root/hf_model/Acme/Nothing-9B-AWQ",
               env={**OFFLINE, "HF_HUB_CACHE": str(tmp_path)})
    assert r.code == 2
    assert r.err == (
        "error: --model: /root/hf_model/Acme/Nothing-9B-AWQ does not exist here, and its folder names "
        "('Acme/Nothing-9B-AWQ', 'Nothing-9B-AWQ') match no KB record or alias, with or without a quantization "
        f"ending, nor a model in the Hugging Face cache ({tmp_path})\n"
        "  fix: give --model ID (`kb list model` lists them), or the model's config.json, or `hf download "
        "Acme/Nothing-9B-AWQ config.json` into the Hugging Face cache\n")


def test_a_store_folder_is_not_taken_for_the_organisation(tmp_path: Path) -> None:
    """vllm#15529's /data/models/Qwen2.5-VL-32B-Instruct: 'models' says where the weights are kept, not who
    published them, so the fix line asks for ORG/NAME rather than `hf download models/...`."""
    r = run_kb("query", "--gpu", "h100", "--model", "/data/models/Nothing-32B-Instruct",
               env={**OFFLINE, "HF_HUB_CACHE": str(tmp_path)})
    assert r.code == 2
    assert "or `hf download ORG/Nothing-32B-Instruct config.json` into the Hugging Face cache" in r.err, r.err
    assert "models/Nothing-32B-Instruct config.json" not in r.err


def test_a_path_that_exists_is_read_as_before(tmp_path: Path) -> None:
    folder = tmp_path / "Qwen3-235B-A22B"  # the name of a record, but the folder is here: its config decides
    folder.mkdir()
    (folder / "config.json").write_bytes((ROOT / "probes" / "vllm_boot" / "models" / "qwen3-8b" /
                                          "config.json").read_bytes())
    code, a, err = _query(str(folder))
    assert code == 0, err
    assert a["query"]["model"] == "qwen3-235b-a22b" and "model" not in a["assumed"]
    assert a["memory"]["kv_bytes_per_token"] == 36 * 8 * 128 * 2 * 2 / 4  # qwen3-8b's shapes, on 4 GPUs


def test_a_local_folder_without_a_config_is_read_by_its_name(tmp_path: Path) -> None:
    folder = tmp_path / "Qwen3-8B"
    folder.mkdir()
    r = run_kb("query", "--gpu", "h100", "--model", str(folder), "--json", env=OFFLINE)
    assert r.code == 0, r.err
    assert json.loads(r.out)["assumed"]["model"] == (f"qwen3-8b, recognised from the folder name 'Qwen3-8B' "
                                                     f"({folder} holds no config.json; --model ID overrides)")


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="aZ09._-/\\<>~ ", max_size=12), st.text(alphabet="0123456789", min_size=3, max_size=5))
def test_string_checks_agree_with_the_regexes_they_replaced(text: str, digits: str) -> None:
    """modelname reads names without re (the warm query imports none); each check is the pattern it replaced."""
    import re

    from kbtool.solve.modelname import is_commit, is_hub_id, revision_at

    hub = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")
    assert is_hub_id(text) is bool(hub.match(text))
    assert is_commit(text) is bool(re.fullmatch(r"[0-9a-f]{40}", text))
    dated = re.compile(r"-(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])$|-2[4-9](?:0[1-9]|1[0-2])$")
    for name in (f"deepseek-r1-{digits}", f"x{digits}", f"-{digits}"):
        m = dated.search(name)
        assert revision_at(name) == (m.start() if m else None)
    assert folders(text) == [p.replace("___", ".") for p in re.split(r"[\\/]+", text.strip())
                             if p and p not in (".", "..", "~")]  # no 'snapshots' in the alphabet


@pytest.mark.parametrize(("name", "want"), [
    # sglang#322's folder: a store word joined to the name by '_', and '_' for each '.' and '-' of
    # mistralai/Mistral-7B-Instruct-v0.2; the same spelling of v0.3 (a record) is read as v0.3 ...
    ("hf_model_mistral_7B_Instruct_v0_3", ("mistral-7b-instruct-v0.3", "hf_model_mistral_7B_Instruct_v0_3", None,
                                           None)),
    # ... and v0.2 (no record here) is not taken for v0.3
    ("hf_model_mistral_7B_Instruct_v0_2", None),
    # '_' between digits is tried as '-' first: gemma_2_9b is gemma-2-9b, not gemma-2.9b
    ("hf_model_gemma_2_9b_it", ("gemma-2-9b-it", "hf_model_gemma_2_9b_it", None, None)),
    ("Qwen2_5-7B-Instruct", ("qwen2.5-7b", "Qwen2_5-7B-Instruct", None, None)),
    ("models-Qwen2_5-7B-Instruct-AWQ", ("qwen2.5-7b", "models-Qwen2_5-7B-Instruct-AWQ", "int4", "-AWQ")),
])
def test_underscores_for_dots_and_a_store_word_joined_to_the_name(name: str, want: tuple[str, ...] | None) -> None:
    names = {"mistral-7b-instruct-v0.3": "mistral-7b-instruct-v0.3", "gemma-2-9b-it": "gemma-2-9b-it",
             "qwen2.5-7b": "qwen2.5-7b"}
    assert stripped(names, [name]) == want


def test_a_folder_spelled_with_underscores_is_its_recorded_model() -> None:
    code, a, err = _query("/llm_path/hf_model_gemma_2_9b_it")
    assert code == 0, err
    assert a["query"]["model"] == "gemma-2-9b-it"
    assert a["assumed"]["model"].startswith("gemma-2-9b-it, recognised from the folder name 'hf_model_gemma_2_9b_it'")
