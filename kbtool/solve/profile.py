"""The `--assume typical` profile (design.md §4, issue 17): what an input the user did not give is taken to be.

One documented profile, listed in every answer's `assumed:` line and JSON:

- libraries: the newest release of each library the KB records (kernel records' `latest_version`, and the
  versions probe evidence ran), so a verdict from evidence on an older release does not cover the query;
- cuda: the oldest CUDA toolkit that every kernel recording its wheels' toolkits (`cuda_toolkits`) is built for
  (Image.cuda); with the shipped records 12.9, FlashInfer's oldest (its README's CUDA Support section), which
  also meets the FA-3 (12.3) and FlashMLA (12.8) gates; not assumed where no kernel record lists its toolkits;
- head dims: the model's, else 128;
- block size: the engine's default (vLLM: 16, vllm/config/cache.py `block_size` default on CUDA) for dense
  attention; for MLA models (vLLM forces each MLA backend's own block size) and without an engine, what the
  library's paged-KV path needs (a gate that only a block size decides passes, saying which value it needs);
- batch 1; q dtype bf16 (fp16 when the KV cache is fp16); KV dtype = the q dtype;
- attention features with no model: none (no sinks, no sliding window, no softcap, no ALiBi, dense GQA).

`--assume none` fills nothing: every gate that reads an input not given is `unknown` and says what passes.
"""

from __future__ import annotations

from kbtool.solve.conditions import compare_versions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kbtool.solve.image import Image

HEAD_DIM = 128
BATCH = 1
NO_FEATURES = {"sinks": False, "sliding_window": 0, "softcap": 0, "alibi": False, "sparse": False}
# inputs a gate may leave to the profile to choose ("the library's paged-KV requirement")
CHOSEN = frozenset({"block_size"})


def newest_releases(img: Image) -> dict[str, str]:
    """{library: newest version the KB records}."""
    out: dict[str, str] = {}
    pairs = [(k.library, k.latest_version) for k in img.kernels if k.latest_version]
    pairs += list(img.releases.items())
    for lib, ver in pairs:
        ver = ver.split("+", 1)[0]
        if lib not in out or compare_versions(ver, out[lib]) > 0:
            out[lib] = ver
    return out
