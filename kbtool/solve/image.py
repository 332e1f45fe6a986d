"""The query image: what the solver reads from the KB, as plain data that loads in milliseconds.

`kb query` must not import pydantic (issue #8), so the solver does not read record models: kbtool/solve/imagebuild.py
takes the validated records once and keeps only what answering needs (kernels, claims with compiled conditions,
engine backends, accelerators and their architectures, models, the architecture each evidence record ran on, bench
measurements per accelerator, each engine's own section) as plain data; `Image.load` reads it back from the
`marshal` bytes of the KB cache.

Views (`KernelV`, `ClaimV`, ...) carry the attribute names of the record models they stand for, flattened
where the solver only needs a leaf (a claim's `status` is its `verification.status`).
"""

from __future__ import annotations

import marshal

try:
    from _operator import itemgetter  # the C module alone: operator.py costs the warm query its import
except ImportError:  # pragma: no cover
    from operator import itemgetter

from kbtool.names import resolve_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


IMAGE_VERSION = 28  # 28: models' encoders carry `profile`; 27: models' experts carry `bias`
# 26: models' `group_dtypes` and `kept_unquantized`
# 25: boot_errors carry their row's quantity; 24: models' `rope_scaling` and `rotary_dim`
# 22: claims' `handles`; 21: vLLM's engine-release defaults beside kernel calls and two-part claims;
# 20: a two-part claim's status is its weakest part's; 19: backends carry kernel calls
# 13: the SGLang section; 14: backend platforms; 15: engine sections (engine-NAME);
# 16: the vLLM section (MLA prefill orders); 17: KV formats and the typical CUDA (kernel records)
# 12: recorded vLLM boots (measured pools); 11: dispute sides carry their own requires;
# 10: models carry their experts (vLLM's MoE workspace); 9: models carry their architecture; 8: claims carry
# measured values; 7: engine-priority records


def _at(i: int) -> Any:
    return property(itemgetter(i))


class KernelV(tuple):  # type: ignore[type-arg]
    """A kernel: (id, library, phases, attention, variant_of, latest_version). A tuple, so the image loads
    without building thousands of objects field by field."""

    __slots__ = ()
    kind = "kernel"
    if TYPE_CHECKING:
        id: str
        library: str
        phases: list[str]
        attention: list[str]
        variant_of: str | None
        latest_version: str | None
    else:
        id, library, phases, attention, variant_of, latest_version = (_at(i) for i in range(6))


class ClaimV(tuple):  # type: ignore[type-arg]
    """A claim: gate fields, with the verification and reason blocks flattened (a tuple, as KernelV)."""

    __slots__ = ()
    kind = "claim"
    if TYPE_CHECKING:
        id: str
        subject: str
        effect: str
        when: tuple[Any, ...] | None
        requires: tuple[Any, ...] | None
        scope: tuple[tuple[str, str | None, str | None, str | None], ...]
        scope_text: str | None
        status: str
        evidence: tuple[str, ...]
        code: str
        message: str
        workaround: str | None
        sources: tuple[str, ...]
        reads: tuple[str, ...]  # the query variables its conditions and message read
        # per-scope verdicts: (sm, ((library, version), ...), phase, status, evidence ids)
        verdicts: tuple[tuple[Any, ...], ...]
        sides: tuple[tuple[str, tuple[str, ...], tuple[Any, ...] | None], ...]  # disputed: (position, source
        # locators, what the side says must hold) per side
        # values the probe runs behind its verdicts measured: (quantity, value, unit, conditions, accelerator)
        measured: tuple[tuple[str, float, str, tuple[tuple[str, Any], ...], str | None], ...]
        handles: tuple[str, ...]  # caveat claims this one settles where it holds
    else:
        (id, subject, effect, when, requires, scope, scope_text, status, evidence, code, message, workaround,
         sources, reads, verdicts, sides, measured, handles) = (_at(i) for i in range(18))


class CallV(tuple):  # type: ignore[type-arg]
    """One kernel as a backend calls it (kbtool/model/engine_backend.py KernelCall), compiled: (kernel, build,
    fork_of, bundled, phases, attention, when, shape, call, source locator, engine scope)."""

    __slots__ = ()
    if TYPE_CHECKING:
        kernel: str
        build: str
        fork_of: str | None
        bundled: bool
        phases: list[str]
        attention: list[str]
        when: Any
        shape: dict[str, Any]
        call: str
        source: str
        scope: list[tuple[str, str | None, str | None, str | None]]
    else:
        kernel, build, fork_of, bundled, phases, attention, when, shape, call, source, scope = (
            _at(i) for i in range(11))


class BackendV:
    __slots__ = ("attention", "backend_name", "calls", "engine", "id", "kernels", "platforms")
    kind = "engine-backend"

    def __init__(self, t: tuple[Any, ...]) -> None:
        self.id, self.engine, self.backend_name, self.kernels, self.attention, self.platforms, calls = t
        self.calls = [CallV(c) for c in calls]


class AcceleratorV:
    __slots__ = ("architecture", "capacity", "driver_memory", "id", "vendor")
    kind = "accelerator"

    def __init__(self, t: tuple[Any, ...]) -> None:
        self.id, self.vendor, self.architecture, self.capacity, self.driver_memory = t

    def capacity_bytes(self) -> int | None:
        return self.capacity  # type: ignore[no-any-return]


LAYER_FIELDS = ("type", "count", "kv_heads", "head_dim", "head_dim_v", "window", "chunk", "sinks", "kv_lora_rank",
                "rope_dim", "qk_nope_head_dim", "index_head_dim", "index_n_heads", "index_topk", "state",
                "state_bytes")
MODEL_FIELDS = ("id", "architecture", "parameters", "parameter_groups", "weight_dtype", "unquantized_dtype",
                "quantized", "quant_group_size", "group_dtypes", "kept_unquantized", "weight_bytes", "weight_bytes_f32",
                "num_heads", "head_dim", "hidden_size", "intermediate_size", "vocab_size", "max_context", "softcap",
                "alibi", "layers", "experts", "encoders", "rope_scaling", "rotary_dim", "mtp_layers",
                "mtp_parameters")


class LayerV:
    """A layer group (the fields of kbtool.model.model_card.LayerGroup the solver reads)."""

    __slots__ = LAYER_FIELDS
    if TYPE_CHECKING:
        type: str
        count: int
        kv_heads: int | None
        head_dim: int | None
        head_dim_v: int | None
        window: int | None
        chunk: int | None
        sinks: bool | None
        kv_lora_rank: int | None
        rope_dim: int | None
        qk_nope_head_dim: int | None
        index_head_dim: int | None
        index_n_heads: int | None
        index_topk: int | None
        state: list[dict[str, Any]] | None
        state_bytes: int | None

    def __init__(self, d: dict[str, Any]) -> None:
        for f in LAYER_FIELDS:
            setattr(self, f, d.get(f))


class ModelV:
    """A model (the fields of kbtool.model.model_card.Model the solver and the memory model read)."""

    __slots__ = (*MODEL_FIELDS, "sinks", "sparse", "dtype_unread")
    kind = "model"
    if TYPE_CHECKING:
        id: str
        architecture: str | None
        parameters: int
        parameter_groups: dict[str, int] | None
        experts: dict[str, int] | None
        encoders: list[dict[str, Any]] | None
        weight_dtype: str
        unquantized_dtype: str
        quantized: list[str] | None
        quant_group_size: int | None
        group_dtypes: dict[str, str] | None
        kept_unquantized: dict[str, int] | None
        weight_bytes: int | None
        weight_bytes_f32: int | None
        num_heads: int
        head_dim: int
        hidden_size: int | None
        intermediate_size: int | None
        vocab_size: int | None
        max_context: int | None
        rope_scaling: dict[str, Any] | None
        rotary_dim: int | None
        softcap: float | None
        alibi: bool
        layers: list[LayerV]
        mtp_layers: int | None
        mtp_parameters: int | None
        sinks: bool
        sparse: bool
        dtype_unread: bool  # a quantized checkpoint known by name only: its torch_dtype was not read (modelref)

    def __init__(self, d: dict[str, Any]) -> None:
        for f in MODEL_FIELDS:
            setattr(self, f, d.get(f))
        self.dtype_unread = bool(d.get("dtype_unread"))
        self.unquantized_dtype = self.unquantized_dtype or "bf16"
        self.alibi = bool(self.alibi)
        self.layers = [LayerV(g) for g in d["layers"]]
        self.sinks = any(g.sinks for g in self.layers)
        self.sparse = any(g.index_head_dim for g in self.layers)


def model_row(m: Any) -> dict[str, Any]:
    """A model record as plain data (the fields ModelV reads), for marshal."""
    d: dict[str, Any] = m.model_dump(include=set(MODEL_FIELDS), exclude_none=True)
    d["layers"] = [g.model_dump(include=set(LAYER_FIELDS), exclude_none=True) for g in m.layers]
    return d


class BenchRow:
    """One bench case (a row of a bench run's measurement record), as kbtool.measure.rank reads it; `id` cites
    the row (`<record id>#<configuration key>-<backend>`)."""

    __slots__ = ("accelerator", "conditions", "id", "kernel", "metrics", "outcome", "phase", "samples")

    def __init__(self, t: tuple[Any, ...]) -> None:
        (self.id, self.phase, self.kernel, self.conditions, self.outcome, self.samples, correct,
         self.accelerator) = t
        self.metrics = {} if correct is None else {"correct": correct}


# ---- the loaded image ---------------------------------------------------------------------------


class Image:
    """The solver's view of the KB."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._names: dict[str, Any] = dict(data["names"])  # kind -> bytes, or the decoded {alias: id}
        self.kernels = [KernelV(t) for t in data["kernels"]]
        self.kernel_by_id = {k.id: k for k in self.kernels}
        self._claim_rows: dict[str, list[tuple[Any, ...]]] = data["claims"]  # subject -> rows
        self._claims: dict[str, list[ClaimV]] = {}
        self.libraries: list[str] = data["libraries"]
        self.kv_formats: dict[str, tuple[int, str | None]] = data["kv_formats"]  # name -> (B/token/layer, source)
        self.cuda: str | None = data["cuda"]  # the typical CUDA toolkit (kernel records' cuda_toolkits)
        self._raw = {k: data[k] for k in ("accelerators", "models", "backends", "priorities", "boots",
                                               "boot_errors")}
        self._raw.update((k, v) for k, v in data.items() if k.startswith("engine-"))
        self._open: dict[str, Any] = {}
        self.cc: dict[str, str | None] = data["cc"]
        self.evidence_arch: dict[str, str] = data["evidence_arch"]
        self.releases: dict[str, str] = data["releases"]  # library -> newest version probe evidence ran
        self.probed: dict[str, list[str]] = data.get("probed") or {}  # library -> every version evidence ran
        self._bench: dict[str, bytes] = data["bench"]
        self.origins: dict[str, str] = {}  # model id -> how --model was read as it (kbtool/solve/modelref.py)

    def _section(self, name: str) -> Any:
        got = self._open.get(name)
        if got is None:
            got = self._open[name] = marshal.loads(self._raw[name])
        return got

    def names(self, kind: str) -> dict[str, str]:
        """{lowercase id or alias: id} of the records of `kind`."""
        table = self._names.get(kind)
        if isinstance(table, bytes):
            table = self._names[kind] = marshal.loads(table)
        return table or {}

    @classmethod
    def load(cls, blob: bytes | memoryview) -> Image | None:
        """The image in `blob`; None for bytes of another version (or not an image at all)."""
        try:
            data = marshal.loads(blob)
        except (ValueError, EOFError, TypeError):
            return None
        if not isinstance(data, dict) or data.get("version") != IMAGE_VERSION:
            return None
        return cls(data)

    def claims(self, subject: str) -> list[ClaimV]:
        """The claims about `subject` (wrapped on first use: a query reads the claims of its kernels only)."""
        got = self._claims.get(subject)
        if got is None:
            got = self._claims[subject] = [ClaimV(t) for t in self._claim_rows.get(subject, ())]
        return got

    def all_claims(self) -> list[ClaimV]:
        return [c for s in self._claim_rows for c in self.claims(s)]

    def accelerator(self, rid: str) -> AcceleratorV:
        return AcceleratorV(self._section("accelerators")[rid])

    def accelerators(self) -> list[AcceleratorV]:
        accs = self._section("accelerators")
        return [AcceleratorV(accs[k]) for k in sorted(accs)]

    def model(self, rid: str) -> ModelV:
        return ModelV(self._section("models")[rid])

    def backends(self, engine: str) -> list[BackendV]:
        return [BackendV(t) for t in self._section("backends") if t[1] == engine]

    def priorities(self, engine: str) -> list[tuple[Any, ...]]:
        """(id, engine, platform, scope, [(when, order)]) of the engine's priority records
        (kbtool/solve/engines/vllm/selection.py)."""
        return [t for t in self._section("priorities") if t[1] == engine]

    def boots(self) -> list[tuple[Any, ...]]:
        """The recorded vLLM boots (see _boot_rows)."""
        return list(self._section("boots"))

    def boot_errors(self) -> list[tuple[Any, ...]]:
        """kb's estimate against the recorded boots, per model class (see _boot_errors)."""
        return list(self._section("boot_errors"))

    def engine_data(self, name: str) -> dict[str, Any]:
        """An engine's own section (see _engine_sections): SGLang's resolution pipelines and claims."""
        return self._section(f"engine-{name}")  # type: ignore[no-any-return]

    def bench_rows(self, accelerator: str) -> list[BenchRow]:
        blob = self._bench.get(accelerator)
        return [BenchRow(t) for t in marshal.loads(blob)] if blob else []

    def resolve(self, name: str, kind: str, flag: str) -> str:
        """The id an id or alias names (case-insensitive); a miss names the three nearest record ids.
        A model may also be a config.json path (loaded into this image), see kbtool/solve/modelref.py."""
        if kind == "model":
            from kbtool.solve.modelref import resolve_model

            got = resolve_model(self, name, model_row)
            if got is not None:
                return got
            from kbtool.errors import NotFoundError

            try:
                return resolve_name(self.names(kind), name, kind, flag)
            except NotFoundError as e:  # a model kb has no record of is also read from its config.json
                raise NotFoundError(e.args[0], fix=f"{e.fix} Otherwise give the model's config.json, or `hf "
                                    "download ORG/NAME config.json` into the Hugging Face cache") from None
        return resolve_name(self.names(kind), name, kind, flag)

    def add_model(self, row: dict[str, Any], origin: str | None = None) -> str:
        """Add a model row (one not in the records, e.g. from a config.json) and return its id; `origin` says
        where it came from (kbtool/solve/modelref.py), for the answer's assumed line."""
        self._section("models")[row["id"]] = row
        self.names("model")
        self._names["model"] = {**self.names("model"), row["id"]: row["id"]}
        if origin:
            self.note_origin(row["id"], origin)
        return str(row["id"])

    def model_row(self, rid: str) -> dict[str, Any]:
        """A copy of a model's row (kbtool/solve/modelref.py derives a quantized release from it)."""
        return dict(self._section("models")[rid])

    def note_origin(self, rid: str, origin: str) -> None:
        """Say how `--model` was read as `rid` (a folder name matched, a config's repository and commit)."""
        self.origins[rid] = origin

    def model_origin(self, rid: str) -> str | None:
        """What note_origin said of `rid`, or None."""
        return self.origins.get(rid)

