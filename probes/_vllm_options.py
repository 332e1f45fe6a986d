"""Run under the interpreter that has vLLM installed (no GPU, no kbtool): parse engine options with vLLM's own
argument parser and build vLLM's own config objects from them, or ask attention backends (by registry name) for
their supported head sizes, printing one JSON document per case.
The vllm-options probe (probes/vllm_options.py) starts it; importing vLLM without a GPU uses _vllm_grid's setup.

Usage: python _vllm_options.py CASE_JSON
"""

from __future__ import annotations

import json
import os
import sys


def run(case: dict) -> dict:
    from _vllm_grid import setup

    env = setup()
    if case.get("fa_cc"):
        return fa_versions(case, env)
    if case.get("backends"):
        return head_sizes(case)
    import vllm
    from vllm.config import CacheConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    out: dict = {"vllm": vllm.__version__, "argv": case["argv"]}
    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    try:
        args = parser.parse_args(case["argv"])
    except SystemExit as exc:  # argparse exits on an unknown flag or a bad value
        out["parsed"] = False
        out["error"] = f"argparse exited {exc.code}"
        return out
    engine_args = EngineArgs.from_cli_args(args)
    out["parsed"] = True
    out["engine_args"] = {k: _plain(getattr(engine_args, k, None)) for k in case["fields"]}
    cache_fields = {field: getattr(engine_args, arg) for field, arg in case["cache_config"].items()}
    cache = CacheConfig(**cache_fields)
    out["cache_config"] = {k: _plain(getattr(cache, k, None)) for k in case["cache_config_read"]}
    return out


def head_sizes(case: dict) -> dict:
    """Each named backend's `get_supported_head_sizes()` and `supports_head_size(h)` for the case's head sizes."""
    import vllm
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    out: dict = {"vllm": vllm.__version__, "backends": {}}
    for name in case["backends"]:
        try:
            cls = AttentionBackendEnum[name].get_class()
        except Exception as exc:
            out["backends"][name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            continue
        out["backends"][name] = {
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "supported": [int(h) for h in cls.get_supported_head_sizes()],
            "accepts": {str(h): bool(cls.supports_head_size(h)) for h in case["head_sizes"]},
        }
    return out


def fa_versions(case: dict, env: dict) -> dict:
    """`get_flash_attn_version` (vllm/v1/attention/backends/fa_utils.py) per head size, and with ALiBi, on a platform
    that answers the case's compute capability."""
    import vllm
    from vllm.v1.attention.backends.fa_utils import get_flash_attn_version

    major, minor = (int(x) for x in str(case["fa_cc"]).split("."))
    env["GridPlatform"].cap = env["DeviceCapability"](major, minor)
    return {"vllm": vllm.__version__, "cc": case["fa_cc"],
            "version": {str(h): get_flash_attn_version(head_size=h) for h in case["head_sizes"]},
            "alibi": get_flash_attn_version(requires_alibi=True, head_size=case["head_sizes"][0])}


def _plain(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


if __name__ == "__main__":
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    print("KB-OPTIONS " + json.dumps(run(json.loads(sys.argv[1]))))
