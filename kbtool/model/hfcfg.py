"""A Hugging Face config.json as the importers read it: the text model's fields with the top level as a fallback,
the dtypes it names, and errors that name the field (kbtool/model/hfconfig.py maps the shapes, hfquant.py the
quantization)."""

from __future__ import annotations

from typing import Any

from kbtool.errors import UsageError

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
          "bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}


class ConfigError(UsageError):
    """A config.json the importer cannot map (a missing or unsupported field)."""


class Cfg:
    """The text model's config, with the top level as a fallback, and errors that name the missing field."""

    def __init__(self, data: dict[str, Any], where: str) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: not a JSON object", fix="give the model's config.json")
        text = data.get("text_config") or data.get("llm_config") or data.get("language_config")
        self.top, self.where = data, where
        self.text = text if isinstance(text, dict) else data
        self.nested = self.text is not data

    def get(self, key: str, default: Any = None) -> Any:
        v = self.text.get(key)
        if v is None and self.nested:
            v = self.top.get(key)
        return default if v is None else v

    def need(self, key: str, why: str) -> Any:
        v = self.get(key)
        if v is None:
            path = f"text_config.{key}" if self.nested else key
            raise ConfigError(f"{self.where}: field '{path}' is missing ({why})",
                              fix=f"add '{key}' to the config, or write the record by hand (`kb new model ID`)")
        return v


def int_field(c: Cfg, key: str, why: str) -> int:
    v = c.need(key, why)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ConfigError(f"{c.where}: field '{key}' is {v!r}, not a count", fix="give a whole number")
    return v


def whole(c: Cfg, key: str, v: Any, *, positive: bool = True) -> int:
    """A config count: a whole number (1.0 is one; 1.5, "8", true are refused), positive unless told."""
    path = f"text_config.{key}" if c.nested and key in c.text else key
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or (v <= 0 if positive else v < 0):
        raise ConfigError(f"{c.where}: {path} is {v!r}, not a {'positive ' if positive else ''}whole number",
                          fix=f"give {path} as a whole number (transformers and the engines refuse the config)")
    return v


def model_dtype(c: Cfg) -> str:
    raw = c.get("torch_dtype") or c.get("dtype") or "bfloat16"
    d = DTYPES.get(str(raw).replace("torch.", ""))
    if d is None:
        raise ConfigError(f"{c.where}: torch_dtype '{raw}' is not bf16, fp16 or fp32", fix="fix torch_dtype")
    return d
