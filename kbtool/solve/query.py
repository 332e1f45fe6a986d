"""Query inputs: parse and normalize what the user typed; bad values raise UsageError with an accepted form."""

from __future__ import annotations

from kbtool.errors import UsageError
from kbtool.vocab import DTYPE_ALIASES, KV_DTYPES, LIBRARIES, PHASES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_CTX_FIX = "give a positive token count such as 131072, 128k or 1m (k = 1024, m = 1024 x 1024)"

LIB_ALIASES = {
    "flash_attn": "flash-attn", "flash-attention": "flash-attn", "flash-attn-3": "flash-attn",
    "flash_attn_3": "flash-attn", "flash_attn_4": "flash-attn-4", "flash-attention-4": "flash-attn-4",
    "fa4": "flash-attn-4", "flashinfer-python": "flashinfer", "flash_mla": "flashmla", "flash-mla": "flashmla",
    "pytorch": "torch", "cudnn_frontend": "cudnn-frontend", "nvidia-cudnn-frontend": "cudnn-frontend",
}


def _digits(s: str) -> bool:
    return s.isascii() and s.isdigit()


def _ctx_parts(text: str) -> tuple[str, str] | None:
    """(number, unit) of `  128.5 K `: ASCII digits with at most one fraction, an optional k/m (any case),
    spaces anywhere around them; None for anything else. (No regex: `kb query` starts faster without re.)"""
    t = text.strip()
    unit = ""
    if t and t[-1] in "kKmM":
        unit, t = t[-1].lower(), t[:-1].rstrip()
    whole, dot, frac = t.partition(".")
    if not _digits(whole) or (dot and not _digits(frac)):
        return None
    return t, unit


def parse_ctx(text: str | int) -> int:
    """'131072', '128k', '1m', '1M' -> tokens (k = 1024). Zero, negative, fractional tokens and garbage fail."""
    parts = _ctx_parts(str(text))
    if parts is None:
        raise UsageError(f"--ctx: '{text}' is not a context length", fix=_CTX_FIX)
    num, unit = parts
    if len(num.partition(".")[0]) > 12:  # beyond any float's exact integers, and any context
        raise UsageError(f"--ctx: '{str(text)[:40]}' is larger than any context this tool sizes (16G tokens)",
                         fix=_CTX_FIX)
    mult = {"": 1, "k": 1024, "m": 1024 * 1024}[unit]
    value = float(num) * mult
    if value != int(value):
        raise UsageError(f"--ctx: '{text}' is not a whole number of tokens", fix=_CTX_FIX)
    if value <= 0:
        raise UsageError(f"--ctx: '{text}' must be positive", fix=_CTX_FIX)
    if value > 1 << 34:
        raise UsageError(f"--ctx: '{text}' is larger than any context this tool sizes (16G tokens)", fix=_CTX_FIX)
    return int(value)


def _dtype(text: str, flag: str, allowed: tuple[str, ...]) -> str:
    d = DTYPE_ALIASES.get(text.strip().lower())
    if d is None or d not in allowed:
        forms = "bf16, fp16, fp8 (= fp8_e4m3), fp8_e5m2, fp4 (= nvfp4)" if flag == "--kv" else ", ".join(allowed)
        raise UsageError(f"{flag}: unknown dtype '{text}'", fix=f"use one of {forms}")
    return d


def parse_kv(text: str) -> str:
    return _dtype(text, "--kv", KV_DTYPES)


def parse_dtype(text: str) -> str:
    return _dtype(text, "--dtype", ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp32"))


def parse_phase(text: str | None) -> list[str]:
    t = (text or "both").strip().lower()
    if t == "both":
        return list(PHASES)
    if t in PHASES:
        return [t]
    raise UsageError(f"--phase: unknown phase '{text}'", fix="use prefill, decode or both")


def parse_libs(items: list[str] | None) -> dict[str, str]:
    """['flashinfer=0.6.18', 'cuda=12.8'] -> {'flashinfer': '0.6.18', 'cuda': '12.8'}."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, version = item.partition("=")
        name = name.strip().lower()
        name = LIB_ALIASES.get(name, name)
        version = version.strip()
        import re

        if not sep or not name or not re.match(r"^v?[0-9]+(\.[0-9A-Za-z]+)*([.+-][0-9A-Za-z.+-]+)?$", version):
            raise UsageError(f"--lib: '{item}' is not NAME=VERSION", fix="e.g. --lib flashinfer=0.6.18 --lib cuda=12.8")
        out[name] = version.lstrip("v")
    return out


ASSUME = ("typical", "none")


def parse_assume(text: str | None) -> str:
    t = (text or "typical").strip().lower()
    if t not in ASSUME:
        raise UsageError(f"--assume: unknown profile '{text}'", fix="use typical (the default) or none")
    return t


def parse_cuda(text: str | None) -> str | None:
    if text is None:
        return None
    t = text.strip().lower().lstrip("v")
    parts = t.split(".")
    if not (1 <= len(parts) <= 3 and all(_digits(p) for p in parts)):
        raise UsageError(f"--cuda: '{text}' is not a CUDA version", fix="e.g. --cuda 12.8")
    return t


def check_libs(libs: dict[str, str], known: set[str]) -> None:
    """Library names must be query variables or libraries the KB scopes claims to."""
    allowed = set(LIBRARIES) | known
    for name in libs:
        if name not in allowed:
            raise UsageError(f"--lib: unknown library '{name}'", fix=f"use one of {', '.join(sorted(allowed))}")


_UPPER = {"--gpus": 4096, "--head-dim": 4096, "--block-size": 1 << 20}
"""The largest value kb models per flag (4096 is the model schema's head-dim bound): beyond it, an error, never a
silent "yes" from gates that record nothing that far out."""


def positive_int(value: int | None, flag: str, example: str) -> int | None:
    if value is None:
        return None
    if value <= 0:
        raise UsageError(f"{flag}: {value} must be a positive integer", fix=f"e.g. {flag} {example}")
    top = _UPPER.get(flag if not flag.endswith(("-tp", "-tp-size", "--tp", "-tensor-parallel-size")) else "--gpus")
    if top is not None and value > top:
        raise UsageError(f"{flag}: {value} is beyond what kb models (at most {top:,})", fix=f"e.g. {flag} {example}")
    return value


def parse_util(value: float | None) -> float:
    if value is None:
        return 0.9
    if not 0 < value <= 1:
        raise UsageError(f"--gpu-memory-utilization: {value} must be in (0, 1]",
                         fix="e.g. --gpu-memory-utilization 0.9 (the default; --util is an alias)")
    return value


WEIGHT_FORMATS = ("bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4")
_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 1 << 10,
               "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "k": 10**3, "m": 10**6, "g": 10**9}


def parse_weights(text: str | None) -> str | None:
    if text is None:
        return None
    t = text.strip().lower()
    t = {"bfloat16": "bf16", "float16": "fp16", "fp8_e4m3": "fp8", "w8a8": "int8", "fp4": "nvfp4"}.get(t, t)
    if t not in WEIGHT_FORMATS:
        raise UsageError(f"--weights: unknown weight format '{text}'", fix=f"use one of {', '.join(WEIGHT_FORMATS)}")
    return t


def parse_size(text: str | None, flag: str = "--reserve") -> int | None:
    """'4GiB', '2.5GB', '1500MiB', '3e9' or a byte count -> bytes (GB = 1e9, GiB = 2^30)."""
    if text is None:
        return None
    t = text.strip().lower().replace(" ", "")
    i = len(t)
    while i and t[i - 1].isalpha():
        i -= 1
    num, unit = t[:i], t[i:]
    try:
        value = float(num) * _SIZE_UNITS[unit]
    except (ValueError, KeyError):
        raise UsageError(f"{flag}: '{text}' is not a memory size",
                         fix=f"e.g. {flag} 4GiB, 2.5GB or 3000000000") from None
    if value < 0:
        raise UsageError(f"{flag}: '{text}' must not be negative", fix=f"e.g. {flag} 4GiB")
    if not value <= 1 << 50:  # NaN and inf fail it too
        raise UsageError(f"{flag}: '{text}' is beyond any GPU's memory (at most 1 PiB)", fix=f"e.g. {flag} 4GiB")
    return int(value)


class Query:
    """Normalized inputs. `None` means not given (unknown to the gates).

    The engine's own part is three fields, whatever the engine: `release` (the one its module pins), `settings`
    (what its pasted serve line sets that kb's options do not name, in its own spelling) and `ignored` (the flags of
    that line kb does not consider, shown in the answer)."""

    __slots__ = (
        "assume",
        "attention",
        "batch",
        "batched_tokens",
        "block_size",
        "built",
        "ctx",
        "dtype",
        "engine",
        "gpu",
        "gpus",
        "gpus_flag",
        "head_dim",
        "head_dim_v",
        "ignored",
        "kernels",
        "kv",
        "libs",
        "line_read_with",
        "model",
        "phases",
        "release",
        "release_note",
        "reserve",
        "settings",
        "utilization",
        "utilization_given",
        "weights",
    )

    def __init__(self, gpu: str | None = None, gpus: int = 1, ctx: int | None = None, kv: str | None = None,
                 dtype: str | None = None, model: str | None = None, head_dim: int | None = None,
                 head_dim_v: int | None = None, batch: int | None = None, phases: list[str] | None = None,
                 engine: str = "none", kernels: list[str] | None = None, libs: dict[str, str] | None = None,
                 block_size: int | None = None, attention: str | None = None, utilization: float | None = None,
                 weights: str | None = None, reserve: int | None = None, batched_tokens: int | None = None,
                 assume: str = "typical", release: str | None = None) -> None:
        self.gpu, self.gpus, self.ctx, self.kv, self.dtype, self.model = gpu, gpus, ctx, kv, dtype, model
        self.gpus_flag = "--gpus"  # the flag the GPU count came from, as typed (--vllm-args -tp), for errors
        self.head_dim, self.head_dim_v, self.batch = head_dim, head_dim_v, batch
        self.phases = phases if phases is not None else list(PHASES)
        self.engine = engine
        self.kernels = kernels if kernels is not None else []
        self.libs = libs if libs is not None else {}
        self.block_size, self.attention = block_size, attention
        # not given: 0.9 here, and the engine's own default where its memory block sizes the pool
        self.utilization = 0.9 if utilization is None else utilization
        self.utilization_given = utilization is not None
        self.weights, self.reserve, self.batched_tokens = weights, reserve, batched_tokens
        self.assume = assume  # "typical": fill what was not given from the documented profile; "none": strict
        self.release = release  # the engine's release, as its module pins it
        self.release_note: str | None = None  # why that release, where the engine chose it (the assumed: line)
        self.settings: dict[str, Any] = {}  # the serve line's engine-only settings (the engine's spelling)
        self.ignored: list[str] = []  # the serve line's flags kb does not consider
        self.built: dict[str, Any] | None = None  # build_query's arguments, where a serve line was pasted
        self.line_read_with: str | None = None  # the recorded release whose flag table read that line

    def __repr__(self) -> str:
        return f"Query({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__ if k != 'built')})"

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "gpu": self.gpu, "gpus": self.gpus, "ctx": self.ctx, "kv": self.kv, "dtype": self.dtype,
            "model": self.model, "head_dim": self.head_dim, "head_dim_v": self.head_dim_v, "batch": self.batch,
            "phase": self.phases[0] if len(self.phases) == 1 else "both", "engine": self.engine,
            "kernels": list(self.kernels), "libs": dict(sorted(self.libs.items())),
            "block_size": self.block_size, "attention": self.attention, "utilization": self.utilization,
            "weights": self.weights, "reserve": self.reserve, "max_num_batched_tokens": self.batched_tokens,
            "assume": self.assume,
        }
        if self.release is not None:
            d["release"] = self.release
        if self.settings:
            d["settings"] = dict(self.settings)
        if self.ignored:
            d["ignored"] = list(self.ignored)
        return d
