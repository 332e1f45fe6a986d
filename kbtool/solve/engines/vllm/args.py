"""`--vllm-args "serve MODEL ..."`: the flags of a vLLM serve command that decide attention and KV memory.

Only what the pre-flight answer needs is read: the model (a KB id, a Hugging Face id whose last part is a KB
id or alias, or a config path), --kv-cache-dtype, --attention-backend, --max-model-len, -tp /
--tensor-parallel-size, --gpu-memory-utilization, --block-size, --max-num-batched-tokens, --max-num-seqs and
--enforce-eager (the last two move vLLM's reserve: its sampler profile and CUDA-graph estimate),
--enable-prefix-caching / --no-enable-prefix-caching (a hybrid model's state pages per request),
--limit-mm-per-prompt, --language-model-only and --enable-mm-embeds (a text-only serve), --quantization
(the weights' bytes), -pp / --pipeline-parallel-size (layers and weights per stage), -dp /
--data-parallel-size (replicas: the memory per GPU does not change), --kv-cache-memory-bytes (the pool itself,
per GPU) and --speculative-config (an MTP draft: spec.py); `--max-model-len auto` (or -1) lets vLLM fit the
context to memory. Numbers are read as vLLM reads them (32k = 32,000; 32K = 32,768). Other flags are ignored and
listed, so the answer can say what it did not
consider.
"""

from __future__ import annotations

from kbtool.errors import UsageError
from kbtool.solve.engines.flags import MAX_HUMAN, command, environment, human_int, number_word, split, table

__all__ = ["MAX_HUMAN", "QUANT_WEIGHTS", "ServeArgs", "checked", "human_int", "parse"]

_FLAGS = {
    "--kv-cache-dtype": "kv_cache_dtype", "--attention-backend": "attention_backend",
    "--max-model-len": "max_model_len", "-tp": "tp", "--tensor-parallel-size": "tp",
    "--gpu-memory-utilization": "gpu_memory_utilization", "--block-size": "block_size",
    "--max-num-batched-tokens": "max_num_batched_tokens", "--model": "model", "--dtype": "dtype",
    "--max-num-seqs": "max_num_seqs", "--quantization": "quantization", "-q": "quantization",
    "--pipeline-parallel-size": "pp", "-pp": "pp", "--data-parallel-size": "dp", "-dp": "dp",
    "--kv-cache-memory-bytes": "kv_cache_memory", "--kv-cache-memory": "kv_cache_memory",
    "--limit-mm-per-prompt": "limit_mm_per_prompt", "--speculative-config": "speculative_config",
}
_INTS = {"max_model_len", "tp", "block_size", "max_num_batched_tokens", "max_num_seqs", "pp", "dp", "kv_cache_memory"}
QUANT_WEIGHTS = {"fp8": "fp8", "fbgemm_fp8": "fp8", "ptpc_fp8": "fp8", "awq": "int4", "awq_marlin": "int4",
                 "gptq": "int4", "gptq_marlin": "int4", "mxfp4": "mxfp4", "modelopt_fp4": "nvfp4",
                 "bitsandbytes": "int4"}
"""--quantization methods whose weight bytes per parameter kb knows (kbtool/solve/weights.py WEIGHT_BYTES)."""
_SWITCHES = {"--enforce-eager": "enforce_eager", "--language-model-only": "language_model_only",
             "--enable-mm-embeds": "enable_mm_embeds",
             "--skip-mm-profiling": "skip_mm_profiling"}  # flags without a value
# (--skip-mm-profiling: vLLM's profile run skips the encoder pass, gpu_model_runner.py:6243 in 0.24.0; encoder_pass.py)
_PREFIX = {"--enable-prefix-caching": True, "--no-enable-prefix-caching": False}
# (--enable-prefix-caching on a hybrid Mamba/GDN model turns the state cache to mamba_cache_mode "align", two state
# pages per request: vllm/model_executor/models/config.py:417-432 MambaModelConfig.verify_and_update_config, vLLM
# 0.24.0 commit ee0da84ab; planning.state_mode)
# (--limit-mm-per-prompt / --language-model-only / --enable-mm-embeds: whether a multimodal prefix-LM model is
# served text-only, which turns vLLM's use_mm_prefix off; mmprefix.py)


class ServeArgs:
    """What kb reads off a vLLM serve line. A plain class: `dataclasses` (and the `inspect` it imports) would add
    13 ms to every pasted-line query."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.kv_cache_dtype: str | None = None
        self.attention_backend: str | None = None
        self.max_model_len: int | None = None
        self.tp: int | None = None
        self.gpu_memory_utilization: float | None = None
        self.block_size: int | None = None
        self.max_num_batched_tokens: int | None = None
        self.dtype: str | None = None
        self.max_num_seqs: int | None = None
        self.enforce_eager = False
        self.language_model_only = False
        self.enable_mm_embeds = False
        self.skip_mm_profiling = False
        self.limit_mm_per_prompt: str | None = None
        self.enable_prefix_caching: bool | None = None  # None: the release's default
        self.quantization: str | None = None
        self.pp: int | None = None
        self.dp: int | None = None
        self.kv_cache_memory: int | None = None
        self.speculative_config: str | None = None  # the JSON value, read by spec.read
        self.ignored: list[str] = []
        self.spelled: dict[str, str] = {}  # field -> the flag as the user typed it (-tp, --dtype)
        self.read_with: str | None = None  # the recorded release whose flag table read the line
        self.refused: list[str] = []  # flags as typed that release's parser does not know (vLLM exits on them)
        self.model_runner: str | None = None  # "V1" / "V2" where the line sets VLLM_USE_V2_MODEL_RUNNER=0 / 1


def runner_env(words: list[str]) -> str | None:
    """The model runner a line's leading environment assignments force: VLLM_USE_V2_MODEL_RUNNER, which vLLM reads
    with maybe_convert_bool (bool(int(value)): 0 is V1, any other integer V2; envs.py:1922-1924 in 0.26.0) and which
    decides the runner before the model's default (config/vllm.py:550-553 in 0.26.0, :523 in 0.24.0). None where
    the line does not set it (or sets a value vLLM cannot read)."""
    value = environment(words).get("VLLM_USE_V2_MODEL_RUNNER")
    try:
        return None if value is None else "V2" if int(value) else "V1"
    except ValueError:
        return None


_HUMAN = {"max_model_len", "max_num_batched_tokens", "kv_cache_memory"}  # vLLM reads these with human_readable_int


def _number(flag: str, key: str, text: str) -> int | float:
    try:
        if key in _HUMAN:
            return human_int(text)
        if key in _INTS:
            return int(text)
        return float(text)
    except ValueError:
        example = ("20G (G = 2^30 bytes, g = 10^9)" if key == "kv_cache_memory" else
                   "131072 (128k = 128,000; 128K = 131,072)" if key in _HUMAN else "2" if key in _INTS else "0.9")
        raise UsageError(f"--vllm-args: {flag} takes a number; got '{text}'", fix=f"e.g. {flag} {example}") from None


_POSITIVE = {"tp", "pp", "dp", "block_size", "max_num_seqs", "max_num_batched_tokens"}
MAX_PARALLEL = 4096  # no deployment has more GPUs in one tensor/pipeline/data-parallel group


def checked(flag: str, key: str, value: int | float) -> int | float:
    """vLLM refuses a parallel size, block size or batch bound below 1 (its config post-init): so does kb, naming
    the flag as typed (-tp 0 is reported as -tp, not as kb's --gpus); gpu_memory_utilization in (0, 1]."""
    if key in _POSITIVE and value < 1:
        raise UsageError(f"--vllm-args: {flag} {value} must be at least 1 (vLLM refuses it)", fix=f"e.g. {flag} 1")
    if key in ("tp", "pp", "dp") and value > MAX_PARALLEL:
        raise UsageError(f"--vllm-args: {flag} {value} is more GPUs than kb models (at most {MAX_PARALLEL})",
                         fix=f"e.g. {flag} 8")
    if key == "max_model_len" and value < 1 and value != -1:
        raise UsageError(f"--vllm-args: {flag} {value} must be at least 1, or -1 (auto) (vLLM refuses it)",
                         fix=f"e.g. {flag} 32768, or {flag} auto")
    if key == "kv_cache_memory" and value < 0:
        raise UsageError(f"--vllm-args: {flag} {value} must not be negative", fix=f"e.g. {flag} 20G")
    if key == "gpu_memory_utilization" and not 0 < value <= 1:
        raise UsageError(f"--vllm-args: {flag} {value} must be in (0, 1]", fix=f"e.g. {flag} 0.9")
    return value


def parse(text: str, release: str | None = None) -> ServeArgs:
    """The serve command's flags (`vllm serve MODEL ...`, `serve MODEL ...`, `python -m
    vllm.entrypoints.openai.api_server --model MODEL ...` or just `MODEL ...`, after any `NAME=value` environment
    assignments), read with
    `release`'s flag table (kbtool/solve/engines/flags.py; None: the newest recorded)."""
    try:
        words = split(text)
    except ValueError as exc:
        raise UsageError(f"--vllm-args: cannot split the command: {exc}", fix="quote it as one shell word") from None
    runner = runner_env(words)
    words = command(words, ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main"))
    if words[:1] == ["vllm"]:
        words = words[1:]
    if words[:1] == ["serve"]:
        words = words[1:]
    out = ServeArgs()
    out.model_runner = runner
    tbl = table("vllm", "--vllm-args", release)
    out.read_with = tbl.release if tbl is not None else None
    i, positional = 0, False
    while i < len(words):
        w = words[i]
        if not w.startswith("-") or number_word(w):
            if out.model is None:
                out.model, positional = w, True
            elif positional:  # vLLM's serve parser takes one positional (model_tag) and exits 2 on another
                whose = f"{tbl.name}'s" if tbl is not None else "vLLM's"
                out.ignored.append(f"{w} (a second positional argument; {whose} parser refuses it)")
                out.refused.append(w)
            else:
                out.ignored.append(f"{w} (a positional argument besides --model; kb reads --model)")
            i += 1
            continue
        flag, eq, inline = w.partition("=") if w.startswith("--") else (w, "", "")
        name = flag
        if tbl is not None:
            canon = tbl.canonical(flag)
            if canon is None:  # vLLM exits 2 on it ("unrecognized arguments"); kb says so and reads on
                out.ignored.append(tbl.unknown(flag))
                out.refused.append(flag)
                i += 1 if eq or i + 1 >= len(words) or words[i + 1].startswith("-") else 2
                continue
            name = canon
        if name in _SWITCHES and not eq:
            setattr(out, _SWITCHES[name], True)
            i += 1
            continue
        if name in _PREFIX and not eq:
            out.enable_prefix_caching = _PREFIX[name]
            i += 1
            continue
        key = _FLAGS.get(name)
        if key is None or (tbl is not None and tbl.spec(name)["kind"] == "switch"):
            out.ignored.append(name)
            if tbl is None:
                if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
                    i += 1  # the ignored flag's value
            else:
                n = tbl.takes(name, words, i, bool(eq))
                for v in [inline] if eq else words[i + 1:i + 1 + n]:
                    tbl.check(flag, name, v)
                i += n
            i += 1
            continue
        if eq:
            value = inline
        else:
            if i + 1 >= len(words):
                raise UsageError(f"--vllm-args: {flag} needs a value", fix=f"e.g. {flag} <value>")
            value = words[i + 1]
            i += 1
        i += 1
        if key in _INTS or key == "gpu_memory_utilization":  # read with vLLM's types (tests/solve/test_serve_flags.py)
            setattr(out, key, checked(flag, key, _number(flag, key, value)))
        else:
            if tbl is not None:
                tbl.check(flag, name, value)  # vLLM's own choices for this flag
            setattr(out, key, value)
        out.spelled[key] = flag
    return out
