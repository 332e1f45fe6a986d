#!/usr/bin/env python3
"""What a multimodal boot case's profile run will encode, worked out on a CPU (no GPU, no network).

usage: python3 probes/vllm_boot/mm_profile.py [CASE_ID ...]      under an interpreter with vLLM installed
       (default: every case of probes/vllm_boot/cases.json whose model folder holds a preprocessor_config.json)

For each case it resolves the engine config from the same LLM(...) keyword arguments boot_case.py boots with
(boot_case.llm_kwargs), with vLLM's CUDA platform answering as an 80 GiB cc 9.0 device (probes/_vllm_grid.py setup),
and HF_HUB_OFFLINE=1 so that everything comes from the model folder. Then it does what the worker does before the
text forward of its profile run (vLLM 0.26.0, v1/worker/gpu_model_runner.py):
  :863-867    MultiModalBudget(vllm_config, mm_registry): tokens per item of each modality, the encoder budget and
              the items per batch (multimodal/encoder_budget.py)
  :6391-6409  the modality with the most tokens per item and its items per batch, logged as "Encoder cache will be
              initialized with a budget of %s tokens, and profiled with %s %s items of the maximum feature size."
  :5737-5757  _get_mm_dummy_batch: mm_registry.get_dummy_mm_inputs(model_config, {modality: 1}, cache=budget.cache),
              one item repeated items-per-batch times
and prints, per case, one JSON object: the modality, tokens per item, items, the encoder budget, the dummy item's
tensors (shape, dtype) and its grid, and the tower's sequence length over the batch (patches). A case that fails
prints the exception instead; the boot would fail there too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _boot_case():
    spec = importlib.util.spec_from_file_location("_kb_boot_case", HERE / "boot_case.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def profile(case: dict, boot_case) -> dict:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.encoder_budget import MultiModalBudget

    mdir = HERE / "models" / case["model"]
    kwargs = boot_case.llm_kwargs(case, mdir)
    out: dict = {"id": case["id"], "kwargs": {k: v for k, v in kwargs.items() if k != "model"}}
    saved = {k: os.environ.get(k) for k in case.get("env", {})}
    os.environ.update({k: str(v) for k, v in case.get("env", {}).items()})
    try:
        vc = EngineArgs(**kwargs).create_engine_config()
        mc = vc.model_config
        out["architecture"] = mc.architecture
        out["model_runner"] = "V2" if vc.use_v2_model_runner else "V1"  # V1 alone makes the encoder pass
        out["dtype"] = str(mc.dtype).removeprefix("torch.")
        budget = MultiModalBudget(vc, MULTIMODAL_REGISTRY)
        out["tokens_per_item"] = dict(budget.mm_max_toks_per_item)
        out["items_per_batch"] = dict(budget.mm_max_items_per_batch)
        out["encoder_budget"] = budget.get_encoder_budget()
        modality = budget.get_modality_with_max_tokens()
        out["modality"] = modality
        out["items"] = budget.mm_max_items_per_batch[modality]
        dummy = MULTIMODAL_REGISTRY.get_dummy_mm_inputs(mc, mm_counts={modality: 1}, cache=budget.cache)
        item = dummy["mm_kwargs"][modality][0]
        tensors = {}
        for k, v in item.items():
            data = getattr(v, "data", v)
            tensors[k] = {"shape": list(getattr(data, "shape", [])), "dtype": str(getattr(data, "dtype", ""))
                          .removeprefix("torch.")}
            if k.endswith("grid_thw"):
                tensors[k]["value"] = data.tolist()
        out["item_tensors"] = tensors
        out["placeholders"] = {m: [[p.offset, p.length] for p in ps] for m, ps in dummy["mm_placeholders"].items()}
        pv = tensors.get("pixel_values") or tensors.get("pixel_values_videos") or {}
        shape = pv.get("shape") or []
        # qwen-vit: pixel_values is [patches, C x T x P x P]; siglip: [images, C, H, W] at the patch size of the config
        if len(shape) == 2:
            out["patches_per_item"] = shape[0]
        elif len(shape) == 4:
            p = mc.hf_config.vision_config.patch_size
            out["patches_per_item"] = shape[0] * (shape[2] // p) * (shape[3] // p)
        if "patches_per_item" in out:
            out["patches"] = out["patches_per_item"] * out["items"]
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()[-3000:]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out


def main(argv: list[str]) -> int:
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"})
    sys.path.insert(0, str(HERE.parent))
    from _vllm_grid import setup

    setup()
    boot_case = _boot_case()
    cases = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))
    if argv:
        cases = [c for c in cases if c["id"] in argv]
    else:
        cases = [c for c in cases if (HERE / "models" / c["model"] / "preprocessor_config.json").is_file()]
    bad = 0
    for case in cases:
        row = profile(case, boot_case)
        bad += "error" in row
        print(json.dumps(row), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
