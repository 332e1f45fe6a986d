"""kbtool/store/checkpoint.py: a checkpoint's weight bytes from its safetensors headers, and the query using them.

The shards here are written by the test in the safetensors layout (8-byte header length, JSON header, a sparse
data section of the declared size), with the tensor names, dtypes and packings of each quantization format's
published layout: GPTQ and AWQ pack eight int4 values per int32 with fp16 scales per group of 128, FP8 keeps an
fp32 scale per tensor, NVFP4 packs two fp4 values per byte with an fp8 scale per 16 values and an fp32 global scale.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

from kbtool.store.checkpoint import tensor_bytes
from kbtool.store.untrusted import UntrustedInputError
from tests.util import ROOT, hf_cache, run_kb

SIZE = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "U8": 1, "F8_E4M3": 1, "I64": 8}
CONFIG = ROOT / "probes" / "vllm_boot" / "models" / "qwen3-8b" / "config.json"


def vllm_rope(config: dict[str, object], loaded: str | None = None) -> int:
    """The rope cos/sin caches vLLM's load builds beside the checkpoint's tensors, which kb's weights per GPU count
    (kbtool/solve/engines/vllm/rope.py); Qwen3-8B's config: 40,960 positions x 128 dims x the loaded dtype's bytes."""
    from kbtool.model import Model
    from kbtool.model.hfconfig import to_record
    from kbtool.solve.engines.vllm import rope

    rec = to_record(dict(config), "tiny", where="tiny")
    rec["sources"] = [{"type": "doc", "url": "https://huggingface.co"}]
    return rope.cache_bytes(Model.model_validate(rec), loaded)[0]


def write_shard(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> int:
    """A .safetensors file holding `tensors` (name -> (dtype, shape)); its data bytes."""
    head: dict[str, object] = {"__metadata__": {"format": "pt"}}
    at = 0
    for name, (dtype, shape) in tensors.items():
        n = math.prod(shape) * SIZE[dtype]
        head[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + n]}
        at += n
    raw = json.dumps(head).encode()
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + at)  # sparse: the data section's size without writing it
    return at


def gptq_layer(prefix: str, rows: int, cols: int) -> dict[str, tuple[str, list[int]]]:
    return {f"{prefix}.qweight": ("I32", [rows // 8, cols]), f"{prefix}.qzeros": ("I32", [rows // 128, cols // 8]),
            f"{prefix}.scales": ("F16", [rows // 128, cols]), f"{prefix}.g_idx": ("I32", [rows])}


LAYOUTS = {
    "gptq-int4": {**gptq_layer("model.layers.0.mlp.up_proj", 4096, 12288),
                  "model.embed_tokens.weight": ("F16", [151936, 4096])},
    "awq": {"model.layers.0.mlp.up_proj.qweight": ("I32", [4096, 12288 // 8]),
            "model.layers.0.mlp.up_proj.qzeros": ("I32", [32, 12288 // 8]),
            "model.layers.0.mlp.up_proj.scales": ("F16", [32, 12288]),
            "model.embed_tokens.weight": ("F16", [151936, 4096])},
    "fp8": {"model.layers.0.mlp.up_proj.weight": ("F8_E4M3", [12288, 4096]),
            "model.layers.0.mlp.up_proj.weight_scale": ("F32", [1]),
            "model.layers.0.mlp.up_proj.input_scale": ("F32", [1]),
            "model.embed_tokens.weight": ("BF16", [151936, 4096])},
    "nvfp4": {"model.layers.0.mlp.up_proj.weight": ("U8", [12288, 2048]),
              "model.layers.0.mlp.up_proj.weight_scale": ("F8_E4M3", [12288, 256]),
              "model.layers.0.mlp.up_proj.weight_scale_2": ("F32", [1]),
              "model.embed_tokens.weight": ("BF16", [151936, 4096])},
}


@pytest.mark.parametrize("fmt", sorted(LAYOUTS))
def test_each_format_counts_its_packed_tensors_and_scales(tmp_path: Path, fmt: str) -> None:
    want = write_shard(tmp_path / "model.safetensors", LAYOUTS[fmt])
    got = tensor_bytes(tmp_path)
    assert got is not None and got.total == want and got.files == ["model.safetensors"]


def test_a_sharded_multimodal_checkpoint_counts_its_vision_tower(tmp_path: Path) -> None:
    text = {"model.layers.0.self_attn.q_proj.weight": ("BF16", [4096, 4096])}
    vision = {"visual.blocks.0.attn.qkv.weight": ("BF16", [3840, 1280]), "visual.patch_embed.proj.weight":
              ("BF16", [1280, 3, 2, 14, 14])}
    a = write_shard(tmp_path / "model-00001-of-00002.safetensors", text)
    b = write_shard(tmp_path / "model-00002-of-00002.safetensors", vision)
    wmap = {**dict.fromkeys(text, "model-00001-of-00002.safetensors"),
            **dict.fromkeys(vision, "model-00002-of-00002.safetensors")}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wmap}))
    got = tensor_bytes(tmp_path)
    assert got is not None and got.total == a + b and got.by_dtype == {"BF16": a + b}
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    assert tensor_bytes(tmp_path) is None  # a partial download claims nothing


def test_a_header_that_lies_about_its_data_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    write_shard(path, {"w": ("BF16", [1024, 1024])})
    with path.open("r+b") as f:
        f.truncate(100)
    with pytest.raises(UntrustedInputError) as e:
        tensor_bytes(tmp_path)
    assert "cannot hold" in str(e.value) or "outside the file's" in str(e.value)


def test_the_query_sizes_weights_from_the_headers_and_says_so(tmp_path: Path) -> None:
    tmp_path = tmp_path / "Tiny-FP8"
    tmp_path.mkdir()
    (tmp_path / "config.json").write_bytes(CONFIG.read_bytes())
    total = write_shard(tmp_path / "model.safetensors", {**LAYOUTS["fp8"], "lm_head.weight": ("BF16", [151936,
                                                                                                      4096])})
    r = run_kb("query", "--gpu", "h100", "--ctx", "32k", "--model", str(tmp_path), "--json",
               env={"KB_NO_CACHE": "1"})
    assert r.code == 0, r.err
    a = json.loads(r.out)
    assert a["memory"]["weights_bytes"] == total + vllm_rope(json.loads(CONFIG.read_text())) == total + 40960 * 128 * 2
    by = f"F8_E4M3 {12288 * 4096:,} B, F32 8 B"
    assert a["assumed"]["model"] == (f"tiny-fp8; weights {total / 1e9:,.1f} GB ({total:,} B) from the safetensors "
                                     f"headers of 1 file (BF16 {2 * 151936 * 4096 * 2:,} B, {by})")
    (tmp_path / "model.safetensors").unlink()  # no checkpoint: parameters x bytes, as the formula says
    r = run_kb("query", "--gpu", "h100", "--ctx", "32k", "--model", str(tmp_path), "--json",
               env={"KB_NO_CACHE": "1"})
    a = json.loads(r.out)
    assert "model" not in a["assumed"] and "params x 2 B (bf16)" in a["memory"]["formula"]


def test_a_snapshot_the_engine_downloaded_sizes_its_weights_from_its_shards(tmp_path: Path) -> None:
    shard = tmp_path / "shard"
    total = write_shard(shard, {"model.embed_tokens.weight": ("BF16", [1024, 1024]),
                                "model.layers.0.mlp.up_proj.weight": ("F8_E4M3", [2048, 1024])})
    sha = "fedcba9876543210fedcba9876543210fedcba98"
    hf_cache(tmp_path / "hub", "acme/Tiny-8B", {"config.json": CONFIG.read_bytes(),
                                                "model.safetensors": shard.read_bytes()}, commit=sha)
    r = run_kb("query", "--gpu", "h100", "--model", "acme/Tiny-8B", "--json",
               env={"KB_NO_CACHE": "1", "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")})
    assert r.code == 0, r.err
    a = json.loads(r.out)
    assert total == 2 * 1024 * 1024 + 2048 * 1024
    assert a["memory"]["weights_bytes"] == total + vllm_rope(json.loads(CONFIG.read_text()))
    assert a["assumed"]["model"] == (
        f"tiny-8b from acme/Tiny-8B config.json at commit {sha[:12]}, from the Hugging Face cache {tmp_path / 'hub'}"
        f"; weights {total / 1e9:,.1f} GB ({total:,} B) from the safetensors headers of 1 file "
        f"(BF16 {2 * 1024 * 1024:,} B, F8_E4M3 {2048 * 1024:,} B)")



def test_what_the_engines_do_not_load_is_left_out_and_said(tmp_path: Path) -> None:
    """DeepSeek-V3-style next-n layers (index num_hidden_layers ..), Qwen3-Next-style `mtp.` tensors and rotary
    inv_freq buffers are not loaded into the served model (vLLM utils.py:575, qwen3_next.py:823, utils.py:235)."""
    kept = {"model.layers.0.mlp.up_proj.weight": ("BF16", [1024, 1024]),
            "model.layers.1.mlp.up_proj.weight": ("BF16", [1024, 1024]),
            "model.layers.10.mlp.up_proj.weight": ("BF16", [1024, 16]),  # 10 is a main layer: not the next-n 2
            "visual.blocks.0.attn.qkv.weight": ("BF16", [64, 64])}
    mtp = {"model.layers.2.mlp.up_proj.weight": ("BF16", [1024, 1024]),
           "mtp.fc.weight": ("BF16", [1024, 2048]), "model.mtp.layers.0.norm.weight": ("BF16", [1024])}
    inv = {"model.layers.0.self_attn.rotary_emb.inv_freq": ("F32", [64])}
    write_shard(tmp_path / "model.safetensors", {**kept, **mtp, **inv})
    config = {"num_hidden_layers": 2, "num_nextn_predict_layers": 1}
    got = tensor_bytes(tmp_path, config)
    assert got is not None
    assert got.total == 2 * (2 * 1024 * 1024 + 1024 * 16 + 64 * 64)
    assert got.skipped == {"MTP layers": 2 * (1024 * 1024 + 1024 * 2048 + 1024), "rotary inv_freq": 64 * 4}
    assert got.text.endswith(f"; not loaded: MTP layers {2 * (1024 * 1024 + 1024 * 2048 + 1024):,} B, "
                             "rotary inv_freq 256 B")
    # without num_nextn_predict_layers, layer 2 is a layer like the others
    assert tensor_bytes(tmp_path, {"num_hidden_layers": 2}).total == got.total + 2 * 1024 * 1024  # type: ignore[union-attr]
    # a multimodal config keeps the counts in text_config
    nested = {"text_config": {"num_hidden_layers": 2, "num_nextn_predict_layers": 1}}
    assert tensor_bytes(tmp_path, nested).total == got.total  # type: ignore[union-attr]


def _fp32_checkpoint(folder: Path) -> tuple[int, int]:
    """A float32 checkpoint (config torch_dtype float32, every tensor F32 but one I64 buffer): (total, F32 bytes)."""
    folder.mkdir()
    cfg = json.loads(CONFIG.read_text())
    cfg.pop("dtype", None)
    cfg["torch_dtype"] = "float32"
    (folder / "config.json").write_text(json.dumps(cfg))
    tensors = {"model.embed_tokens.weight": ("F32", [151936, 4096]),
               "model.layers.0.mlp.up_proj.weight": ("F32", [12288, 4096]),
               "model.layers.0.position_ids": ("I64", [40960])}
    total = write_shard(folder / "model.safetensors", tensors)
    return total, total - 8 * 40960


@pytest.mark.parametrize(("engine", "line", "loaded"), [
    ("vllm", None, "bf16"),  # vllm/config/model.py:2440 (0.33.0) _resolve_auto_dtype: "Downcast for float32 models"
    ("sglang", None, "fp16"),  # sglang/srt/configs/model_config.py:2304 (0.5.23): float16 for float32 models
    ("vllm", "vllm serve m --dtype float32", "fp32"),  # asked for: vLLM keeps float32
])
def test_a_float32_checkpoint_is_sized_as_the_engine_loads_it(tmp_path: Path, engine: str, line: str | None,
                                                              loaded: str) -> None:
    """kb summed the headers at 4 bytes per F32 value (SGLang), or dropped them for parameters x 2 (vLLM); the
    engines cast a float32 checkpoint's tensors to their 2-byte dtype as they load them."""
    total, f32 = _fp32_checkpoint(tmp_path / "Tiny-F32")
    args = ["--vllm-args", line.replace(" m ", f" {tmp_path / 'Tiny-F32'} ")] if line else \
        ["--engine", engine, "--model", str(tmp_path / "Tiny-F32")]
    r = run_kb("query", "--gpu", "h100", "--ctx", "8k", *args, "--json", env={"KB_NO_CACHE": "1"})
    assert r.code == 0, r.err
    a = json.loads(r.out)
    want = total if loaded == "fp32" else total - f32 // 2
    cfg = json.loads((tmp_path / "Tiny-F32" / "config.json").read_text())
    assert a["memory"]["weights_bytes"] == want + (vllm_rope(cfg, loaded) if engine == "vllm" else 0)
    assert a["assumed"]["model"].endswith("a float32 checkpoint: loaded at 2 B per value under the engines' --dtype "
                                          "auto (bf16 or fp16, the answer's notes say which), "
                                          f"{(total - f32 // 2) / 1e9:,.1f} GB")
    said = f"fp32 checkpoint: {'vLLM' if engine == 'vllm' else 'SGLang'}'s --dtype "
    assert any(n.startswith(said) and f"loads it as {loaded}" in n for n in a["memory"]["notes"] + a["notes"])
    if loaded != "fp32":
        assert f"F32 tensors ({f32:,} B) at 2 B per value" in a["memory"]["formula"]
