"""vLLM's MTP speculative draft (`--speculative-config '{"method": "mtp", "num_speculative_tokens": N}'`), as each
release builds it, where its engine-release record has a `speculative:` line (each value citing the release's code;
kbtool/model/engine_release.py Speculative). What the draft does to GPU memory:

- its weights: the checkpoint's MTP layers (the model record's `mtp_layers`, `mtp_parameters`), loaded beside the
  model; the draft takes the model's lm_head and embedding instead of its own (`shares_embeddings`);
- its KV cache: each MTP layer registers one attention layer of the model's full-attention type, which joins the KV
  cache groups like any other (Qwen3.5: 16 + 1 full-attention layers beside 48 GDN layers, so the GDN layers are
  padded to groups of 17, "Add 3 padding layers");
- the state pages: a Mamba/GDN layer holds num_speculative_tokens more state pages per request (`state_blocks`);
- the CUDA-graph capture ceiling: max_num_seqs x (1 + num_speculative_tokens) x 2 (`capture_decode_len`).

Not modelled, so the answer stays conditional and says which: another method (eagle, eagle3, draft_model, ngram,
dflash, ...: a draft model of its own or no KV at all), an MTP draft of an architecture the record does not list, a
model whose record keeps no MTP layers, pipeline parallel (the draft sits on the last stage only), a model with
sliding-window layers (from 0.28.0 a multi-module MTP draft keeps extra tokens in each window), and a release without
the line. The draft's own forward in the profile run is left out of the activation peak: it runs one decoder layer
after the model's, whose intermediates are freed by then (a peak kb takes as the model's own).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.model import Model
    from kbtool.solve.image import ModelV

FLAG = "--speculative-config"


class Draft:
    """An MTP draft kb sizes: its attention layers, speculative tokens, parameters, and which of the release's
    effects apply (state pages per token, the capture ceiling)."""

    __slots__ = ("capture", "layers", "method", "parameters", "release", "state_blocks", "tokens")

    def __init__(self, *, layers: int, tokens: int, parameters: int, state_blocks: bool, capture: bool,
                 release: str, method: str) -> None:
        self.layers, self.tokens, self.parameters = layers, tokens, parameters
        self.state_blocks, self.capture, self.release, self.method = state_blocks, capture, release, method

    @property
    def decode_len(self) -> int:
        """The decode query length the capture ceiling multiplies max_num_seqs by (1 without the release's rule)."""
        return 1 + self.tokens if self.capture else 1


def read(text: str | None) -> dict[str, Any] | None:
    """The --speculative-config value as vLLM reads it (a JSON object); {} where it is not one kb reads."""
    if text is None:
        return None
    import json  # only for a line that sets the flag: a warm serve-line query imports no json (tests/test_imports.py)

    try:
        got = json.loads(text)
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def draft(settings: dict[str, Any], model: Model | ModelV | None, release: str | None,
          rows: dict[str, Any]) -> tuple[Draft | None, str | None]:
    """(the MTP draft kb sizes, None) or (None, why it is not modelled) for the line's --speculative-config on
    `release` (its own engine-release row only); (None, None) where the line has none."""
    spec = settings.get("speculative")
    if spec is None:
        return None, None
    if not spec:
        return None, "a speculative draft (the --speculative-config value is not a JSON object kb reads)"
    method = str(spec.get("method") or ("draft_model" if spec.get("model") else "none"))
    row = rows.get(release or "") or {}
    line = row.get("speculative")
    if not line:
        return None, f"a speculative draft ({method}): vLLM {release}'s speculative line is not recorded"
    methods = list(line["mtp_methods"][0])
    if method not in methods or spec.get("model") not in (None, getattr(model, "id", None)):
        return None, f"a draft model and its KV cache (method {method}; kb models only the MTP draft)"
    tokens = spec.get("num_speculative_tokens")
    if not isinstance(tokens, int) or tokens < 1:
        return None, "an MTP draft without num_speculative_tokens (vLLM refuses it)"
    arch = getattr(model, "architecture", None)
    layers, params = getattr(model, "mtp_layers", None), getattr(model, "mtp_parameters", None)
    if arch not in list(line["mtp_architectures"][0]) or not layers or not params:
        return None, (f"an MTP draft of {arch or 'this model'} (its MTP layers and their KV cache: kb sizes the MTP "
                      "draft of Qwen3.5/3.6 checkpoints only)")
    if not line["shares_embeddings"][0]:
        return None, f"an MTP draft with its own embedding and lm_head (vLLM {release})"
    if int(settings.get("pp") or 1) > 1:
        return None, "an MTP draft under pipeline parallel (the draft sits on the last stage)"
    if any(g.type in ("sliding", "chunked") for g in model.layers):  # type: ignore[union-attr]
        return None, "an MTP draft beside sliding-window layers (the windows keep the draft's lookahead)"
    return Draft(layers=int(layers), tokens=tokens, parameters=int(params),
                 state_blocks=bool(line["state_blocks"][0]), capture=bool(line["capture_decode_len"][0]),
                 release=str(release), method=method), None


def words(d: Draft) -> str:
    """The answer's line for the draft it sized."""
    return (f"MTP draft ({d.method}, {d.tokens} speculative tokens, vLLM {d.release}): its {d.layers} MTP layer(s) "
            f"({d.parameters / 1e9:,.2f}B parameters) in the weights, their attention in the KV cache groups"
            + (f", {d.tokens} more state page(s) per request in each Mamba group" if d.state_blocks else "")
            + (f", CUDA graphs captured up to max_num_seqs x {d.decode_len} x 2" if d.capture else ""))
