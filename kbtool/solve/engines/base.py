"""The engine contract (design.md §3), as pre-commit keeps its languages: an abstract base class every engine
implements, checked when the registry instantiates it (an abstract method left out is a TypeError) and by mypy (an
override whose signature differs is an error), and the typed results an engine hands back. No sentence crosses
this seam: an engine returns data, `kbtool/solve/decision.py` decides, `kbtool/render/verdict.py` words it.

An engine says:

- `options`: its query options (a release pin and a pasted serve line); `kb query` builds its option table from them;
- `parse_line`: its serve line as a typed `Line` (kb's options it names, its own settings, flags kept unconsidered),
  read with the pinned release's flag table (`line_reader`);
- `pin_release`: the release it answers for (a usage error names the recorded ones);
- `priority`, `backend_outcome`, `block_size`: its backend order, its own verdict on one backend, its paged block
  size where no backend forces one (the kernel caveats its builds settle are claims' `handles`, data, not code);
- `pick`: its selection, a frozen `Pick` (backend per phase, refusals, its own error, page size and what forced it);
- `memory`: its accounting of the KV pool, a `Memory` whose `pool` is a frozen `Pool` (what it prints at start-up,
  whether its start-up check passes, which release's accounting was used).
"""

from __future__ import annotations

import abc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kbtool.solve.answer import BackendAnswer, KernelAnswer, Memory
    from kbtool.solve.context import Ctx
    from kbtool.solve.gates import Outcome
    from kbtool.solve.image import AcceleratorV, BackendV, Image
    from kbtool.solve.query import Query


class _Frozen:
    """Slotted, compared by value, immutable once built (`object.__setattr__` only in __init__)."""

    __slots__: tuple[str, ...] = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be set")

    def _set(self, **values: object) -> None:
        for k, v in values.items():
            object.__setattr__(self, k, v)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self.__slots__)})"


class Option(_Frozen):
    """One `kb query` option an engine declares: `--vllm VERSION` (key "release") or `--vllm-args CMD` ("line")."""

    __slots__ = ("flag", "help", "key", "metavar")
    flag: str
    key: str
    metavar: str
    help: str

    def __init__(self, flag: str, key: str, metavar: str, help: str) -> None:
        self._set(flag=flag, key=key, metavar=metavar, help=help)


class Line(_Frozen):
    """A pasted serve line, parsed by its engine: kb's own options it names (`options`: model, ctx, kv, gpus, util,
    block_size, dtype, weights, max_num_batched_tokens, kv_pasted), the engine-only settings it sets (`settings`),
    and the flags kb does not consider (`ignored`, shown in every engine's answer)."""

    __slots__ = ("engine", "ignored", "options", "read_with", "settings")
    engine: str
    options: dict[str, Any]
    settings: dict[str, Any]
    ignored: list[str]
    read_with: str | None  # the recorded release whose flag table read the line (None: the engine keeps none)

    def __init__(self, engine: str, options: dict[str, Any], settings: dict[str, Any], ignored: list[str],
                 read_with: str | None = None) -> None:
        self._set(engine=engine, options=dict(options), settings=dict(settings), ignored=list(ignored),
                  read_with=read_with)


PICK_STATES = ("selected", "error", "not_recorded", "depends")


class Pick(_Frozen):
    """An engine's selection on one accelerator.

    - state: selected (it starts with `prefill`/`decode`), error (it refuses to start: `error`, `error_type`),
      not_recorded
      (the release is not recorded: `between` names the releases around it), depends (it needs an input not given).
    - label: the engine and release as people write them ("vLLM 0.33.0"); selected: the backend id it picks.
    - prefill, decode: what runs each phase, in the engine's own names (for MLA the prefill path); prefill_note:
      the prefill shape, or that the path is not recorded.
    - page_size, page_size_by: its paged-KV block and what forced it (None: its default); kv_cache_dtype: as it
      resolves --kv-cache-dtype, where it reports one.
    - refused: [(backend name, first reason)] it passed over ahead of its choice, in its order.
    - source: where the selection comes from when not the release's records (its recorded grid).
    - block: the engine's own data for `--json` (`engine` in the answer): its priority list with every refusal,
      MLA paths, resolved settings.
    """

    __slots__ = (
        "between",
        "block",
        "decode",
        "engine",
        "error",
        "error_type",
        "kv_cache_dtype",
        "label",
        "page_size",
        "page_size_by",
        "prefill",
        "prefill_note",
        "refused",
        "release",
        "selected",
        "source",
        "state",
    )
    engine: str
    label: str
    release: str | None
    state: str
    selected: str | None
    prefill: str | None
    decode: str | None
    prefill_note: str | None
    page_size: int | None
    page_size_by: str | None
    kv_cache_dtype: str | None
    refused: list[tuple[str, str]]
    error: str | None
    error_type: str | None
    between: str | None
    source: str | None
    block: dict[str, Any]

    def __init__(self, *, engine: str, label: str, release: str | None, state: str, selected: str | None = None,
                 prefill: str | None = None, decode: str | None = None, prefill_note: str | None = None,
                 page_size: int | None = None, page_size_by: str | None = None, kv_cache_dtype: str | None = None,
                 refused: list[tuple[str, str]] | None = None, error: str | None = None,
                 error_type: str | None = None, between: str | None = None, source: str | None = None,
                 block: dict[str, Any] | None = None) -> None:
        if state not in PICK_STATES:
            raise ValueError(f"Pick.state: {state!r} is not one of {', '.join(PICK_STATES)}")
        self._set(engine=engine, label=label, release=release, state=state, selected=selected, prefill=prefill,
                  decode=decode, prefill_note=prefill_note, page_size=page_size, page_size_by=page_size_by,
                  kv_cache_dtype=kv_cache_dtype, refused=list(refused or []), error=error, error_type=error_type,
                  between=between, source=source, block=dict(block or {}))

    def to_dict(self) -> dict[str, Any]:
        """The answer's `engine` object: the typed fields, then the engine's own data."""
        out: dict[str, Any] = {f: getattr(self, f) for f in self.__slots__ if f != "block"}
        out["refused"] = [list(r) for r in self.refused]
        for k, v in self.block.items():
            out.setdefault(k, v)
        return out


class Pool(_Frozen):
    """An engine's accounting of its KV pool on one GPU, in its own terms.

    - release: whose accounting sized it; tokens: the pool it reports at start-up (vLLM's "GPU KV cache size",
      SGLang's max_total_num_tokens); concurrency: sequences of the asked length it reports (None: not reported);
    - starts: whether its start-up check passes (None: not decided without a context); error: what it raises when
      it does not; basis: measured (a recorded boot of this line) or estimated;
    - report: the engine's own data for `--json` (`memory.engine_report`), with `text`: its start-up log lines.
    """

    __slots__ = ("basis", "concurrency", "engine", "error", "label", "release", "report", "starts", "tokens")
    engine: str
    label: str
    release: str | None
    tokens: int | None
    concurrency: float | None
    starts: bool | None
    error: str | None
    basis: str
    report: dict[str, Any]

    def __init__(self, *, engine: str, label: str, release: str | None, tokens: int | None,
                 concurrency: float | None, starts: bool | None, error: str | None = None, basis: str = "estimated",
                 report: dict[str, Any] | None = None) -> None:
        self._set(engine=engine, label=label, release=release, tokens=tokens, concurrency=concurrency, starts=starts,
                  error=error, basis=basis, report=dict(report or {}))


class ReleaseChange(_Frozen):
    """One thing an engine's own recordings say changed between two of its releases (`kb diff`).

    - group: "backends" (its backend list), "selection" (which backend its selector picks), "release" (a fact of
      its config resolution), or "missing" (nothing recorded to compare: `note` says what);
    - key: where (a compute capability "8.0", a fact's name); old, new: the values at A and B (None: absent);
    - count, of_total: points that changed out of those compared (selection); examples: a few of them, worded;
    - source: the file at B the change was read from (repo path, or the recorded file); note: anything more.
    """

    __slots__ = ("count", "examples", "group", "key", "new", "note", "of_total", "old", "source")
    group: str
    key: str
    old: Any
    new: Any
    count: int | None
    of_total: int | None
    examples: list[str]
    source: str | None
    note: str | None

    def __init__(self, *, group: str, key: str, old: Any = None, new: Any = None, count: int | None = None,
                 of_total: int | None = None, examples: list[str] | None = None, source: str | None = None,
                 note: str | None = None) -> None:
        self._set(group=group, key=key, old=old, new=new, count=count, of_total=of_total,
                  examples=list(examples or []), source=source, note=note)

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}


class Engine(abc.ABC):
    """A serving engine kb answers for (kbtool/solve/engines/registry.py lists them)."""

    name: str  # as --engine spells it
    label: str  # as people write it (vLLM, SGLang)
    options: tuple[Option, ...]  # its query options: a release pin ("release") and a serve line ("line")
    block_size: int | None = None  # its paged KV block where no backend forces one (None: its pick decides)
    long_context: str | None = None  # how it is told to serve past the model's max context (None: not recorded)
    boot_probe: str | None = None  # the probe whose boots its pool accounting is held to (their measurements)
    memory_flags: dict[str, str] = {}  # serve-line flags that move GPU memory kb does not model -> what they move
    boot_error_record: str | None = None  # the derived measurement of its accounting's error against those boots

    def default_block_size(self, img: Image, q: Query) -> int | None:  # noqa: ARG002 (an engine's override reads them)
        """Its paged KV block for this query's release where no backend forces one (default: `block_size`)."""
        return self.block_size

    @abc.abstractmethod
    def parse_line(self, text: str, release: str | None = None) -> Line:
        """Its pasted serve line, parsed with its own flag names as `release` reads them (None: the default the
        engine pins, as far as it is known before the records are: see `line_reader`); bad values are UsageError."""

    def line_reader(self, release: str | None) -> str | None:  # noqa: ARG002 (an engine without tables)
        """The recorded release whose flag table reads `release`'s serve lines (None: the engine keeps no tables).
        A line read with another table is read again once the release is pinned (kbtool/solve/solver.py)."""
        return None

    @abc.abstractmethod
    def apply_line(self, q: Query, line: Line) -> None:
        """The line's engine-only settings onto the query (q.settings)."""

    @abc.abstractmethod
    def pin_release(self, img: Image, q: Query) -> None:
        """Fix q.release (a usage error names the recorded ones)."""

    @abc.abstractmethod
    def priority(self, cx: Ctx, env: dict[str, Any]) -> list[str]:
        """Its backend ids in its own order of preference for this query."""

    @abc.abstractmethod
    def backend_outcome(self, cx: Ctx, backend: BackendV, env: dict[str, Any]) -> Outcome | None:
        """Its own verdict on one of its backends, or None: kb applies the backend's claims."""

    @abc.abstractmethod
    def memory(self, cx: Ctx, acc: AcceleratorV, env: dict[str, Any], assumed: dict[str, Any]) -> Memory | None:
        """Its memory block for the model on this accelerator (its Pool in `pool`), or None without a model or a
        capacity (a note says why)."""

    @abc.abstractmethod
    def pick(self, cx: Ctx, acc: AcceleratorV, envs: dict[str, dict[str, Any]], assumed: dict[str, Any],
             memory: Memory | None, backends: list[BackendAnswer], kernels: list[KernelAnswer]) -> Pick | None:
        """Its selection on this accelerator (None: nothing recorded to select with)."""

    def section(self, by_kind: dict[str, list[Any]]) -> Any:  # noqa: ARG002 (an engine may read none)
        """Its own part of the query image, compiled from the records by kind (None: it reads the shared parts)."""
        return None

    def recorded_releases(self, img: Image) -> list[str]:  # noqa: ARG002 (an engine's override reads it)
        """Releases its own recordings (selector grids, config resolutions) cover, oldest first (default: none)."""
        return []

    def release_changes(self, img: Image, a: str, b: str) -> list[ReleaseChange]:  # noqa: ARG002
        """What its own recordings say changed from release `a` to `b` (default: nothing recorded to compare)."""
        return []

    def missing_release(self, img: Image, release: str) -> tuple[str, str] | None:  # noqa: ARG002
        """What the KB lacks to judge its probes' evidence of `release` (its resolution records), as (what is
        missing, how to add it); None when nothing is (default: an engine whose judges need no release data)."""
        return None

    def line_flag(self) -> str | None:
        """The option that takes its serve line."""
        return next((o.flag for o in self.options if o.key == "line"), None)

    def release_flag(self) -> str | None:
        """The option that pins its release."""
        return next((o.flag for o in self.options if o.key == "release"), None)

