"""Whether vLLM runs a model's attention with the multimodal prefix mask (`use_mm_prefix`, issue 44).

vLLM passes `use_mm_prefix=model_config.is_mm_prefix_lm` to its attention-backend selector
(vllm/model_executor/layers/attention/attention.py:344 in 0.33.0), and a backend that cannot run the
bidirectional prefix mask refuses it (FLASH_ATTN on Hopper: "mm_prefix (PrefixLM bidirectional attention) requires
FlashAttention v4 ..."). `is_mm_prefix_lm` is the Hugging Face config's own `is_mm_prefix_lm` where it has one
(no config in vLLM or transformers sets it in the releases read), else whether the config's top-level
`model_type` is in a fixed list (MM_PREFIX_TYPES, read per release). From 0.28.0 it also takes
`supports_multimodal`: a deployment with every modality limited to 0 (`--limit-mm-per-prompt`, without
`--enable-mm-embeds`) or `--language-model-only` serves text only and runs without it (TEXT_ONLY_FROM).

kb records no model_type: it is the top-level config class's, which the recorded `architecture` names
(ARCH_TYPES).
"""

from __future__ import annotations

from kbtool.solve.conditions import compare_versions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SOURCE = "vllm/transformers_utils/model_arch_config_convertor.py"
_OLD = frozenset({"bagel", "gemma3", "molmo2", "paligemma"})
_UMM = frozenset({"bagel", "gemma3", "molmo2", "moondream3", "paligemma", "umm"})
_NOW = frozenset({"bagel", "gemma3", "molmo2", "moondream3", "paligemma"})
MM_PREFIX_TYPES: tuple[tuple[str, frozenset[str], str], ...] = (
    ("0.19.1", _OLD, "vllm/config/model.py:1195-1208"),
    ("0.24.0", _UMM, f"{SOURCE}:293-308"),
    ("0.26.0", _UMM, f"{SOURCE}:303-318"),
    ("0.28.0", _UMM, f"{SOURCE}:357-380"),
    ("0.32.0", _NOW, f"{SOURCE}:364-386"),
    ("0.33.0", _NOW, f"{SOURCE}:344-366"),
    ("0.34.0", _NOW, f"{SOURCE}:345-367"),
)
"""(release read, its list of model_types, where it is); a release between two read ones takes the older list."""
TEXT_ONLY_FROM = "0.28.0"
"""The first release read whose is_mm_prefix_lm takes supports_multimodal (0.26.0's does not; 0.27.x not read)."""
ARCH_TYPES = {
    # transformers/models/gemma3/configuration_gemma3.py: Gemma3Config.model_type "gemma3" (Gemma3TextConfig, the
    # text-only Gemma3ForCausalLM's, is "gemma3_text")
    "Gemma3ForConditionalGeneration": "gemma3",
    "PaliGemmaForConditionalGeneration": "paligemma",
}
MODALITIES = {"gemma3": ("image",), "paligemma": ("image",)}
"""get_supported_mm_limits of the model's vLLM class (vllm/model_executor/models/gemma3_mm.py:87-88, paligemma.py)."""


def model_type(model: Any) -> str | None:
    """The config's top-level model_type, from the recorded architecture; None where kb cannot say."""
    return ARCH_TYPES.get(str(getattr(model, "architecture", None) or ""))


def types_for(version: str | None) -> tuple[frozenset[str], str] | None:
    """The release's list and where it is: the read release at or below `version` (releases between two read
    ones take the older list), None before the first."""
    if version is None:
        return None
    found = None
    for read, types, where in MM_PREFIX_TYPES:
        if compare_versions(version, read) >= 0:
            found = (types, where if read == version else f"{where} of {read}, the nearest older release read")
    return found


def text_only(settings: dict[str, Any]) -> str | None:
    """The serve-line flag that makes the deployment text-only, or None."""
    if settings.get("language_model_only"):
        return "--language-model-only"
    return None


def limits_text_only(limits: str | None, mtype: str | None, mm_embeds: bool) -> bool:
    """--limit-mm-per-prompt sets every modality the model takes to 0 (vllm/config/model.py
    _supports_multimodal_inputs, 0.33.0:925-968), and --enable-mm-embeds does not keep them."""
    if mm_embeds or mtype not in MODALITIES:
        return False
    return limits_zero(limits, MODALITIES[mtype])


def limits_zero(limits: str | None, modalities: tuple[str, ...] | list[str]) -> bool:
    """--limit-mm-per-prompt (JSON) sets each of `modalities` to 0."""
    if not limits or not modalities:
        return False
    import json  # only where the line has the flag: the warm query path does not import json

    try:
        given = json.loads(limits)
    except ValueError:
        return False
    if not isinstance(given, dict):
        return False
    return all(given.get(m) == 0 for m in modalities)


def towers_off(model: Any, settings: dict[str, Any]) -> str | None:
    """The serve-line flag under which vLLM skips loading every encoder the record counts, or None: a tower built
    inside `_mark_tower_model` is replaced by a StageMissingLayer, without weights, when every modality it serves
    has get_limit_per_prompt 0 (vllm/model_executor/models/interfaces.py:347-400 in 0.33.0, :249-290 in 0.19.1,
    :252-293 in 0.24.0, :257-298 in 0.26.0), and --language-model-only makes every limit 0
    (vllm/config/multimodal.py:700-701 in 0.33.0, :264-265 in 0.19.1, :315-316 in 0.24.0, :325-326 in 0.26.0).
    Unlike use_mm_prefix, no release of these gates it on --enable-mm-embeds."""
    encs = [e if isinstance(e, dict) else e.model_dump() for e in getattr(model, "encoders", None) or []]
    if not encs:
        return None
    if text_only(settings):
        return "--language-model-only"
    limits = settings.get("limit_mm_per_prompt")
    if all(limits_zero(limits, e.get("modalities") or []) for e in encs):
        return "--limit-mm-per-prompt " + ", ".join(dict.fromkeys(f"{m}: 0" for e in encs for m in e["modalities"]))
    return None


def decide(model: Any, version: str | None, settings: dict[str, Any]) -> tuple[bool | None, str]:
    """(use_mm_prefix, why) for the model under the release: True/False, or None where kb cannot say."""
    mtype = model_type(model)
    if mtype is None:
        return False, "no multimodal prefix-LM architecture"
    got = types_for(version)
    if got is None:
        return None, f"vLLM {version}'s is_mm_prefix_lm list is not read"
    types, where = got
    if mtype not in types:
        return False, f"model_type {mtype} is not in vLLM {version}'s list ({where})"
    off = text_only(settings) or (
        "--limit-mm-per-prompt" if limits_text_only(settings.get("limit_mm_per_prompt"), mtype,
                                                     bool(settings.get("enable_mm_embeds"))) else None)
    if off and compare_versions(str(version), TEXT_ONLY_FROM) >= 0:
        return False, f"{off} serves text only: supports_multimodal False, {where}"
    why = f"{getattr(model, 'architecture', '')}: model_type {mtype}, in vLLM {version}'s list, {where}"
    if off:
        why += f"; {off} does not turn it off before {TEXT_ONLY_FROM}"
    else:
        why += "; multimodal inputs assumed on (--limit-mm-per-prompt all 0, --language-model-only: off)"
    return True, why
