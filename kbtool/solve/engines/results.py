"""What an engine hands back (kbtool/solve/engines/base.py is the contract that returns them): frozen, typed data,
no sentences. `Option` and `Line` describe its query options and a parsed serve line; `Pick` is its selection on
one accelerator, `Pool` its accounting of the KV pool there, `ReleaseChange` one thing its recordings say changed
between two releases. They import nothing of kb's, so the answer's parts (which share their base, ByValue) and the
decision can hold them without reaching up to the engines."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class ByValue:
    """Compared and shown by the values of its fields (`_fields`); not hashable. The base of what an engine hands
    back (_Frozen, below) and of the answer's parts (kbtool/solve/parts.py _Plain)."""

    __slots__ = ()

    def _fields(self) -> tuple[str, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, f) == getattr(other, f) for f in self._fields())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields())})"


class _Frozen(ByValue):
    """Slotted, compared by value, immutable once built (`object.__setattr__` only in __init__)."""

    __slots__: tuple[str, ...] = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be set")

    def _set(self, **values: object) -> None:
        for k, v in values.items():
            object.__setattr__(self, k, v)

    def _fields(self) -> tuple[str, ...]:
        return self.__slots__


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
    and the flags kb does not consider (`ignored`, shown in every engine's answer); `refused` are the flags as typed
    that the reading release's parser does not know (the engine would exit on them)."""

    __slots__ = ("engine", "ignored", "options", "read_with", "refused", "settings")
    engine: str
    options: dict[str, Any]
    settings: dict[str, Any]
    ignored: list[str]
    read_with: str | None  # the recorded release whose flag table read the line (None: the engine keeps none)
    refused: tuple[str, ...]

    def __init__(self, engine: str, options: dict[str, Any], settings: dict[str, Any], ignored: list[str],
                 read_with: str | None = None, refused: tuple[str, ...] = ()) -> None:
        self._set(engine=engine, options=dict(options), settings=dict(settings), ignored=list(ignored),
                  read_with=read_with, refused=tuple(refused))


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
    - report: the engine's own data for `--json` (`memory.engine_report`), with `text`: its start-up log lines;
    - edge: where kb's estimate lies within its own measured error of the start-up check's boundary, what it
      compares (check, kb's ratio to the boundary, the error band and its boots): the verdict is then too close to
      call (None: not near, measured, or not decided).
    """

    __slots__ = ("basis", "concurrency", "edge", "engine", "error", "label", "release", "report", "starts", "tokens")
    engine: str
    label: str
    release: str | None
    tokens: int | None
    concurrency: float | None
    starts: bool | None
    error: str | None
    basis: str
    report: dict[str, Any]
    edge: dict[str, Any] | None

    def __init__(self, *, engine: str, label: str, release: str | None, tokens: int | None,
                 concurrency: float | None, starts: bool | None, error: str | None = None, basis: str = "estimated",
                 report: dict[str, Any] | None = None, edge: dict[str, Any] | None = None) -> None:
        self._set(engine=engine, label=label, release=release, tokens=tokens, concurrency=concurrency, starts=starts,
                  error=error, basis=basis, report=dict(report or {}), edge=edge)


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

