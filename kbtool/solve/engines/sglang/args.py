"""`--sglang-args "python -m sglang.launch_server ..."`: SGLang's command line as ServerArgs fields.

Reads `python -m sglang.launch_server ...`, `sglang serve ...` or bare flags (shell words) with SGLang's flag
names and aliases (0.5.23 sglang/srt/arg_groups/fields/*.py: --tp-size / --tensor-parallel-size, --dp-size /
--data-parallel-size, --pp-size / --pipeline-parallel-size, --ep-size / --expert-parallel-size / --ep,
--attn-cp-size / --attention-context-parallel-size, --model-path / --model; argparse also takes unique
prefixes: --tp, --dp; --pp is ambiguous and refused, as SGLang refuses it) into the ServerArgs fields
kbtool/solve/engines/sglang/resolve.py reads. Every flag is first read through the release's own argparse table
(kbtool/solve/engines/flags.py): switches, prefixes, choices, the type of a flag kb does not model. Numbers as SGLang
reads them: --context-length with SI suffixes (human_readable_int: 32k = 32,000, 32K = 32,768), the rest as
int / float. Fields not given keep SGLang's defaults (docs/sglang-resolution.md §7). Unknown flags are listed,
not fatal; a bad value raises UsageError naming SGLang's flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbtool.errors import UsageError
from kbtool.solve.engines.flags import MAX_HUMAN, FlagTable, command, human_int, number_word, split, table

# flag -> (ServerArgs field, kind): kind "str", "int", "float", "human" (SI suffixes), "switch"
_FLAGS: dict[str, tuple[str, str]] = {
    "--model-path": ("model_path", "str"), "--model": ("model_path", "str"),
    "--tp-size": ("tp_size", "int"), "--tensor-parallel-size": ("tp_size", "int"), "--tp": ("tp_size", "int"),
    "--dp-size": ("dp_size", "int"), "--data-parallel-size": ("dp_size", "int"), "--dp": ("dp_size", "int"),
    "--pp-size": ("pp_size", "int"), "--pipeline-parallel-size": ("pp_size", "int"),
    "--ep-size": ("ep_size", "int"), "--expert-parallel-size": ("ep_size", "int"), "--ep": ("ep_size", "int"),
    "--attn-cp-size": ("attn_cp_size", "int"), "--attention-context-parallel-size": ("attn_cp_size", "int"),
    "--attn-dp-size": ("attn_dp_size", "int"), "--attention-data-parallel-size": ("attn_dp_size", "int"),
    "--enable-dp-attention": ("enable_dp_attention", "switch"),  # deprecated spelling of --attn-dp-size (attn_dp)
    "--context-length": ("context_length", "human"), "--mem-fraction-static": ("mem_fraction_static", "float"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"), "--page-size": ("page_size", "int"),
    "--attention-backend": ("attention_backend", "str"),
    "--prefill-attention-backend": ("prefill_attention_backend", "str"),
    "--decode-attention-backend": ("decode_attention_backend", "str"),
    "--speculative-draft-attention-backend": ("speculative_draft_attention_backend", "str"),
    "--dsa-prefill-backend": ("dsa_prefill_backend", "str"), "--dsa-decode-backend": ("dsa_decode_backend", "str"),
    "--speculative-algorithm": ("speculative_algorithm", "str"),
    "--speculative-eagle-topk": ("speculative_eagle_topk", "int"),
    "--speculative-num-steps": ("speculative_num_steps", "int"),
    "--speculative-num-draft-tokens": ("speculative_num_draft_tokens", "int"),
    "--speculative-draft-model-path": ("speculative_draft_model_path", "str"),
    "--speculative-draft-model": ("speculative_draft_model_path", "str"),
    "--chunked-prefill-size": ("chunked_prefill_size", "int"),
    "--max-prefill-tokens": ("max_prefill_tokens", "human"),  # human_readable_int in 0.5.17 and 0.5.23
    "--max-running-requests": ("max_running_requests", "int"), "--max-total-tokens": ("max_total_tokens", "human"),
    "--cuda-graph-max-bs-decode": ("cuda_graph_max_bs_decode", "int"),
    "--cuda-graph-max-bs-prefill": ("cuda_graph_max_bs_prefill", "int"),
    "--cuda-graph-backend-decode": ("cuda_graph_backend_decode", "str"),
    "--cuda-graph-backend-prefill": ("cuda_graph_backend_prefill", "str"),
    "--disable-cuda-graph": ("disable_cuda_graph", "switch"),
    "--disable-decode-cuda-graph": ("disable_decode_cuda_graph", "switch"),
    "--disable-prefill-cuda-graph": ("disable_prefill_cuda_graph", "switch"),
    "--disable-radix-cache": ("disable_radix_cache", "switch"),
    "--enable-deterministic-inference": ("enable_deterministic_inference", "switch"),
    "--quantization": ("quantization", "str"), "--dtype": ("dtype", "str"),
    "--linear-attn-backend": ("linear_attn_backend", "str"), "--mamba-ssm-dtype": ("mamba_ssm_dtype", "str"),
    "--mamba-radix-cache-strategy": ("mamba_radix_cache_strategy", "str"),
    "--swa-full-tokens-ratio": ("swa_full_tokens_ratio", "float"),
    "--mamba-full-memory-ratio": ("mamba_full_memory_ratio", "float"),
    "--device": ("device", "str"), "--skip-tokenizer-init": ("skip_tokenizer_init", "switch"),
    "--trust-remote-code": ("trust_remote_code", "switch"),
}
# SGLang's defaults for the fields above (ServerArgs; None = resolved later)
DEFAULTS: dict[str, object] = {
    "tp_size": 1, "dp_size": 1, "pp_size": 1, "ep_size": 1, "attn_cp_size": 1, "attn_dp_size": 1,
    "kv_cache_dtype": "auto", "max_prefill_tokens": 16384, "dtype": "auto", "linear_attn_backend": "triton",
    "mamba_radix_cache_strategy": "auto", "device": "cuda", "disable_cuda_graph": False,
    "disable_radix_cache": False, "enable_deterministic_inference": False, "enable_dp_attention": False,
}
CHOICES_RELEASE = "0.5.23"  # the release the choices below are read from (the newest kb records)
_CHOICES = {  # argparse choices (0.5.23 arg_groups/choices.py and fields/model.py; 0.5.17 adds its own)
    "kv_cache_dtype": ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16",
                       "fp4_e2m1"),
    "mamba_radix_cache_strategy": ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"),
    "dtype": ("auto", "half", "float16", "bfloat16", "float", "float32"),
    # 0.5.23 arg_groups/fields/exec_.py:299 and :341 (0.5.17's DSA_CHOICES, server_args.py:341, is a subset of
    # both): the decode list lacks triton_sparse_mla, a prefill-only DSA kernel
    "dsa_prefill_backend": ("flashmla_sparse", "flashmla_sparse_q8", "flashmla_kv", "flashmla_auto",
                            "flashinfer_sparse_mla", "triton_sparse_mla", "fa3", "tilelang", "triton", "aiter",
                            "trtllm", "intel_xpu"),
    "dsa_decode_backend": ("flashmla_sparse", "flashmla_sparse_q8", "flashmla_kv", "flashmla_auto",
                           "flashinfer_sparse_mla", "fa3", "tilelang", "triton", "aiter", "trtllm", "intel_xpu"),
}
ATTENTION_BACKENDS = ("triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3",
                      "fa4", "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla",
                      "tokenspeed_mla", "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter",
                      "wave", "intel_amx", "ascend", "intel_xpu", "cutlass_mla", "dual_chunk_flash_attn")
for _f in ("attention_backend", "prefill_attention_backend", "decode_attention_backend"):
    _CHOICES[_f] = ATTENTION_BACKENDS
_PREFIXES = ("python -m sglang.launch_server", "python3 -m sglang.launch_server", "sglang serve", "sglang")


@dataclass
class LaunchArgs:
    """The parsed command: `fields` are ServerArgs fields given (SGLang spelling and types), `model` the model
    path as written, `unknown` the flags kb does not read."""

    fields: dict[str, object] = field(default_factory=dict)
    model: str | None = None
    unknown: list[str] = field(default_factory=list)
    spelled: dict[str, str] = field(default_factory=dict)  # field -> the flag as typed (--tp, --tp-size)
    read_with: str | None = None  # the recorded release whose flag table read the line
    refused: list[str] = field(default_factory=list)  # flags as typed that release's parser does not know

    def server_args(self) -> dict[str, object]:
        """The fields with SGLang's defaults for the ones not given."""
        return {**DEFAULTS, **self.fields}


def _convert(flag: str, key: str, kind: str, text: str, tbl: FlagTable | None = None) -> object:
    try:
        if kind == "int":
            n = int(text)
            if abs(n) > MAX_HUMAN:  # no size, count or length is this large
                raise ValueError(text)
            return n
        if kind == "float":
            return float(text)
        if kind == "human":
            return human_int(text)
    except ValueError:
        example = "32768 (32k = 32,000; 32K = 32,768)" if kind == "human" else "2"
        raise UsageError(f"--sglang-args: {flag} takes a number; got '{text}'", fix=f"e.g. {flag} {example}") from None
    allowed = _CHOICES.get(key)
    if tbl is not None:
        return text  # the release's own choices were checked (kbtool/solve/engines/flags.py)
    if allowed is not None and text not in allowed:
        raise UsageError(f"--sglang-args: {flag}: invalid choice '{text}': not a choice of SGLang {CHOICES_RELEASE},"
                         " the newest release kb has recorded (a newer SGLang may have it)",
                         fix=f"choose from {', '.join(allowed)}; for a newer release's value, kb's records need that"
                         " release (CONTRIBUTING.md, sglang-resolve)")
    return text


_POSITIVE = {"tp_size", "dp_size", "pp_size", "ep_size", "attn_cp_size", "attn_dp_size", "page_size",
             "context_length", "max_running_requests", "max_total_tokens"}
_PARALLEL = {"tp_size", "dp_size", "pp_size", "ep_size", "attn_cp_size", "attn_dp_size"}  # GPU counts, not tokens
MAX_PARALLEL = 4096


def attn_dp(fields: dict[str, object]) -> int:
    """SGLang's attention-DP width (the attention data-parallel groups inside the TP group): --attn-dp-size, or the
    deprecated `--dp-size N --enable-dp-attention`, which SGLang turns into attn_dp_size N and dp_size 1 (0.5.23
    sglang/srt/arg_groups/parallel_hook.py:39-61 handle_deprecated_dp_attention; 0.5.17 server_args.py:5388 reads
    `attn_dp_size = self.dp_size if enable_dp_attention else 1`). --enable-dp-attention without --dp-size is width
    1: no attention DP in either release (SGLang 0.4.x set dp_size = tp_size for it; no recorded release does)."""
    given = fields.get("attn_dp_size")
    if isinstance(given, int) and given > 1:
        return given
    dp = fields.get("dp_size")
    return dp if isinstance(dp, int) and dp > 1 and fields.get("enable_dp_attention") else 1


def _checked(flag: str, key: str, value: object) -> object:
    """SGLang refuses a parallel size or page size below 1: so does kb, naming SGLang's flag as typed."""
    if key in _POSITIVE and isinstance(value, int) and value < 1:
        raise UsageError(f"--sglang-args: {flag} {value} must be at least 1 (SGLang refuses it)", fix=f"e.g. {flag} 1")
    if key in _PARALLEL and isinstance(value, int) and value > MAX_PARALLEL:
        raise UsageError(f"--sglang-args: {flag} {value} is more GPUs than kb models (at most {MAX_PARALLEL})",
                         fix=f"e.g. {flag} 8")
    if key == "mem_fraction_static" and isinstance(value, float) and not 0 < value < 1:
        raise UsageError(f"--sglang-args: {flag} {value} must be in (0, 1)", fix=f"e.g. {flag} 0.85")
    return value


def _strip(words: list[str]) -> list[str]:
    words = command(words, ("sglang.launch_server",))
    for pre in _PREFIXES:
        p = pre.split()
        if words[:len(p)] == p:
            return words[len(p):]
    if words[:1] and words[0].endswith("launch_server.py"):
        return words[1:]
    return words


def parse(text: str, release: str | None = None) -> LaunchArgs:
    """The flags of an SGLang launch command (see the module docstring), read with `release`'s flag table
    (kbtool/solve/engines/flags.py; None: the newest recorded)."""
    try:
        words = split(text)
    except ValueError as exc:
        raise UsageError(f"--sglang-args: cannot split the command: {exc}", fix="quote it as one shell word") from None
    words = _strip(words)
    out = LaunchArgs()
    tbl = table("sglang", "--sglang-args", release)
    out.read_with = tbl.release if tbl is not None else None
    i = 0
    while i < len(words):
        w = words[i]
        flag, eq, inline = w.partition("=") if w.startswith("--") else (w, "", "")
        name = flag
        if tbl is not None and w.startswith("-") and not number_word(w):
            canon = tbl.canonical(flag)  # argparse's unique prefixes; an ambiguous one (--pp) is refused
            if canon is None:  # SGLang exits 2 on it; kb says so and reads on
                out.unknown.append(tbl.unknown(flag))
                out.refused.append(flag)
                i += 1 if eq or i + 1 >= len(words) or words[i + 1].startswith("-") else 2
                continue
            name = canon
        spec = _FLAGS.get(name)
        if spec is None:
            if not w.startswith("-") and out.model is None and i == 0:
                out.model = w  # `sglang serve MODEL ...`
            elif w.startswith("-") and tbl is not None and name in tbl.flags:
                out.unknown.append(name)
                n = tbl.takes(name, words, i, bool(eq))
                for v in [inline] if eq else words[i + 1:i + 1 + n]:
                    tbl.check(flag, name, v)
                i += n
            elif w.startswith("-"):
                out.unknown.append(flag)
                if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
                    i += 1  # the unknown flag's value
            else:
                out.unknown.append(w)
            i += 1
            continue
        key, kind = spec
        if kind == "switch":
            out.fields[key] = True
            i += 1
            continue
        if eq:
            value = inline
        else:
            if i + 1 >= len(words):
                raise UsageError(f"--sglang-args: {flag} needs a value", fix=f"e.g. {flag} <value>")
            value = words[i + 1]
            i += 1
        i += 1
        if tbl is not None and kind == "str":
            tbl.check(flag, name, value)  # SGLang's own choices (numbers: kb reads them with SGLang's types)
        out.fields[key] = _checked(flag, key, _convert(flag, key, kind, value, tbl))
        out.spelled[key] = flag
    if "model_path" in out.fields:
        out.model = str(out.fields["model_path"])
    return out


def parse_argv(argv: list[str], release: str | None = None) -> LaunchArgs:
    """parse() of an argv list (the recorded grids keep argv lists), read as `release` reads it."""
    import shlex

    return parse(shlex.join(argv), release)
