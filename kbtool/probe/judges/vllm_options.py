"""Probe: vLLM engine options as vLLM's own argument parser and config classes read them, without a GPU.

Each case is one command line. `run` starts probes/_vllm_options.py under the interpreter that has vLLM
(KB_VLLM_PYTHON, else this one): it parses the line with `EngineArgs.add_cli_args(FlexibleArgumentParser())`,
builds `EngineArgs.from_cli_args` and a `CacheConfig` from the parsed values, and reports what they hold.
A control case passes a flag vLLM does not have: the parser must refuse it, or the probe shows nothing.

kv-quant-skip-sliding-window-layers names `--kv-cache-dtype-skip-layers` as the way to keep sliding-window
layers' KV unquantized: the claim holds for a release whose parser takes `--kv-cache-dtype-skip-layers
sliding_window` beside an fp8 KV cache and whose CacheConfig keeps that pattern (vllm/config/cache.py documents
layer indices or attention-type names such as 'sliding_window'; model_executor/layers/attention/attention.py
reads it). The probe tests that the option exists and carries the pattern; that windowed layers gain little
from fp8 is arithmetic (their KV is bounded by the window), not something a parser can show.

The head-size case asks backends (by registry name) for `get_supported_head_sizes()` and `supports_head_size(h)`:
vllm-mla-head-size-576 and cutlass-mla-decode-head-dim-576 hold where FLASHMLA's and CUTLASS_MLA's lists are
exactly [576]; vllm-flex-attention-head-size-alignment holds where FLEX_ATTENTION passes head sizes that are not
a multiple of 8 (36, 100); the runtime crash it warns of needs a GPU and is not tested.

The FA-version case calls `get_flash_attn_version` with the platform answering cc 10.0: for
vllm-flash-attn-fa4-large-head-falls-back-fa2, head size 128 must get FA-4 (the default there, else the case shows
nothing), 192 FA-4, 256 FA-2, and ALiBi FA-2.
"""

from __future__ import annotations

from typing import Any

from kbtool.probe.spec import ProbeSpec

CLAIM = "kv-quant-skip-sliding-window-layers"


ONLY_576 = {"vllm-mla-head-size-576": "FLASHMLA", "cutlass-mla-decode-head-dim-576": "CUTLASS_MLA"}


FLEX = "vllm-flex-attention-head-size-alignment"


FA4 = "vllm-flash-attn-fa4-large-head-falls-back-fa2"


FA_WANT = {"128": 4, "192": 4, "256": 2}


MISALIGNED = [36, 100]


SPEC = ProbeSpec(
    id="vllm-options",
    version=2,  # 2: the FA-version case
    rejudges=(1,),
    order=6,
    title="vLLM engine options through vLLM's own parser (no GPU)",
    claims=[CLAIM, *ONLY_576, FLEX, FA4],
    requires={"gpu": False, "packages": ["vllm"]},
    timeout_s=300,
    untestable="The vLLM options probe needs vLLM installed (pip install 'kbtool[engine]' or KB_VLLM_PYTHON).",
)


def _by_name(observations: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str((o.get("params") or {}).get("name")): o for o in observations}


def judge(observations: list[dict[str, Any]], env: dict[str, Any]) -> list[dict[str, Any]]:
    obs = _by_name(observations)
    heads, fa = obs.get("head-sizes"), obs.get("fa-version")
    return (judge_skip_layers(obs) + (judge_head_sizes(heads) if heads is not None else [])
            + (judge_fa_version(fa) if fa is not None else []))


def judge_fa_version(obs: dict[str, Any]) -> list[dict[str, Any]]:
    m = obs.get("metrics") or {}
    version, got = m.get("vllm"), m.get("version") or {}
    scope = {"vllm": str(version)} if version else {}
    said = f"vLLM {version} get_flash_attn_version at cc {m.get('cc')}: head size {got}, ALiBi {m.get('alibi')}"
    if obs.get("outcome") != "OK" or got.get("128") != 4:
        return [{"claim": FA4, "verdict": "inconclusive", "scope": scope,
                 "detail": f"FA-4 is not the default here, so no fallback can show: "
                           f"{said if obs.get('outcome') == 'OK' else obs.get('message')}"}]
    ok = all(got.get(h) == v for h, v in FA_WANT.items()) and m.get("alibi") == 2
    return [{"claim": FA4, "verdict": "confirmed" if ok else "contradicted", "scope": scope,
             "detail": said + " (vLLM's selection logic with the platform answering cc 10.0; no Blackwell GPU)"}]


def judge_head_sizes(obs: dict[str, Any]) -> list[dict[str, Any]]:
    m = obs.get("metrics") or {}
    version, found = m.get("vllm"), m.get("backends") or {}
    scope = {"vllm": str(version)} if version else {}
    out = []
    for cid, name in ONLY_576.items():
        b = found.get(name) or {}
        if obs.get("outcome") != "OK" or "supported" not in b:
            why = b.get("error") or obs.get("message") or "no answer"
            out.append({"claim": cid, "verdict": "inconclusive", "scope": scope, "detail": f"{name}: {why}"})
            continue
        listed = b["supported"]
        verdict = "confirmed" if listed == [576] else "contradicted"
        out.append({"claim": cid, "verdict": verdict, "scope": scope,
                    "detail": f"vLLM {version} {name} ({b.get('class')}) get_supported_head_sizes() = {listed}"})
    b = found.get("FLEX_ATTENTION") or {}
    accepts = b.get("accepts") or {}
    if obs.get("outcome") != "OK" or not all(str(h) in accepts for h in MISALIGNED):
        why = b.get("error") or obs.get("message") or "no answer"
        out.append({"claim": FLEX, "verdict": "inconclusive", "scope": scope, "detail": f"FLEX_ATTENTION: {why}"})
    else:
        passed = [h for h in MISALIGNED if accepts[str(h)]]
        verdict = "confirmed" if passed == MISALIGNED else "contradicted"
        out.append({"claim": FLEX, "verdict": verdict, "scope": scope,
                    "detail": f"vLLM {version} FLEX_ATTENTION get_supported_head_sizes() = {b.get('supported')}; "
                              f"supports_head_size: {', '.join(f'{h}: {accepts[str(h)]}' for h in MISALIGNED)} "
                              "(validation only: the runtime crash needs a GPU)"})
    return out


def judge_skip_layers(obs: dict[str, Any]) -> list[dict[str, Any]]:
    skip, control = obs.get("skip-sliding-window"), obs.get("control-unknown-flag")
    if skip is None or control is None:
        return []
    version = (skip.get("metrics") or {}).get("vllm") or (control.get("metrics") or {}).get("vllm")
    scope = {"vllm": str(version)} if version else {}
    if skip.get("outcome") == "ERROR" or control.get("outcome") == "ERROR":
        why = skip.get("message") or control.get("message")
        return [{"claim": CLAIM, "verdict": "inconclusive", "scope": scope, "detail": f"the helper failed: {why}"}]
    if control.get("outcome") != "UNSUPPORTED":
        return [{"claim": CLAIM, "verdict": "inconclusive", "scope": scope,
                 "detail": "vLLM's parser accepted an unknown flag (control), so acceptance shows nothing"}]
    argv = " ".join(skip["params"]["argv"])
    if skip.get("outcome") == "UNSUPPORTED":
        return [{"claim": CLAIM, "verdict": "contradicted", "scope": scope,
                 "detail": f"vLLM {version}'s parser refused `{argv}` ({skip.get('message')})"}]
    m = skip.get("metrics") or {}
    want = skip["params"]["expect"]["kv_cache_dtype_skip_layers"]
    held = {"EngineArgs": (m.get("engine_args") or {}).get("kv_cache_dtype_skip_layers"),
            "CacheConfig": (m.get("cache_config") or {}).get("kv_cache_dtype_skip_layers")}
    wrong = {k: v for k, v in held.items() if v != want}
    if wrong:
        return [{"claim": CLAIM, "verdict": "contradicted", "scope": scope,
                 "detail": f"vLLM {version} parsed `{argv}` but holds {wrong}, not {want}"}]
    return [{"claim": CLAIM, "verdict": "confirmed", "scope": scope,
             "detail": f"vLLM {version}'s parser takes `{argv}`; EngineArgs and CacheConfig hold "
                       f"kv_cache_dtype_skip_layers={want} beside cache_dtype "
                       f"{(m.get('cache_config') or {}).get('cache_dtype')!r}; an unknown flag is refused (control). "
                       "Tested: the option and its 'sliding_window' pattern, not the memory arithmetic"}]
