"""kbtool/store/hfconfig_file.py: the source a config's SOURCE.yaml gives becomes the record's source."""

from __future__ import annotations

import shutil
from pathlib import Path

from kbtool.store.hfconfig_file import read_config
from tests.util import DATA

HF = DATA / "hf-configs"


def test_a_copy_read_on_the_hub_keeps_its_address() -> None:
    """A config read from a Hugging Face repository (host: huggingface) is cited with its page address as well as
    repo, path and commit, so a reader does not look for that repository on GitHub."""
    src = read_config(str(HF / "llama-3-8b" / "config.json"))["sources"][0]
    assert src["repo"] == "philippkolbe/huggingface" and src["commit"]
    assert src["url"].startswith("https://huggingface.co/philippkolbe/huggingface/blob/") and src["path"] in src["url"]


def test_a_copy_read_on_github_is_cited_by_repo_path_and_commit_alone() -> None:
    src = read_config(str(HF / "llama-3.1-8b" / "config.json"))["sources"][0]
    assert src["repo"] == "ai-dynamo/aiconfigurator" and "url" not in src


def test_the_hub_copy_is_byte_for_byte_the_blob_its_cache_named(tmp_path: Path) -> None:
    """The Hub page shows the JSON without its layout; the copy was written in the Hub's layout and must hash to
    the git blob name the Hugging Face cache gave the file (a cache names blobs by their git hash)."""
    import hashlib

    body = (HF / "llama-3-8b" / "config.json").read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
    assert blob == "31553d63b8f18df5d6d440860751533ada3759e4"
    changed = tmp_path / "config.json"
    shutil.copy(HF / "llama-3-8b" / "config.json", changed)
    changed.write_bytes(body.replace(b"128009", b"128001"))
    other = changed.read_bytes()
    assert hashlib.sha1(b"blob %d\0" % len(other) + other).hexdigest() != blob


def test_a_qwen_vl_folders_processor_files_give_the_pixel_limits(tmp_path: Path) -> None:
    """config.json leaves a dynamic-resolution tower's pixel limits to the processor files beside it, which vLLM's
    processor reads: read from a folder that has them, kb sizes the start-up encoder pass (the qwen3-vl-4b boot at
    one sequence went from +2.77% to +1.02%); without them it says the pass is not sized."""
    src = Path(__file__).parents[2] / "probes" / "vllm_boot" / "models" / "qwen3-vl-4b"
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(src / "config.json", bare / "config.json")
    prof = read_config(str(bare))["encoders"][0]["profile"]
    assert "max_pixels" not in prof and "pixels_source" not in prof
    full = tmp_path / "full"
    shutil.copytree(src, full)
    prof = read_config(str(full))["encoders"][0]["profile"]
    assert (prof["max_pixels"], prof["video_max_pixels"]) == (16777216, 25165824)
    assert str(full / "preprocessor_config.json") in prof["pixels_source"]
    (full / "video_preprocessor_config.json").unlink()  # an older processor: max_pixels at the top level
    (full / "preprocessor_config.json").write_text('{"max_pixels": 12845056, "min_pixels": 3136}')
    prof = read_config(str(full))["encoders"][0]["profile"]
    assert prof["max_pixels"] == 12845056 and "video_max_pixels" not in prof
