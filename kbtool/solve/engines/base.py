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
    from pathlib import Path
    from typing import Any

    from kbtool.kb import KB
    from kbtool.solve.context import Ctx
    from kbtool.solve.engines.drafts import ReleaseDraft
    from kbtool.solve.engines.results import Line, Option, Pick, ReleaseChange
    from kbtool.solve.gates import Outcome
    from kbtool.solve.image import AcceleratorV, BackendV, Image
    from kbtool.solve.parts import BackendAnswer, KernelAnswer, Memory
    from kbtool.solve.query import Query


class Engine(abc.ABC):
    """A serving engine kb answers for (kbtool/solve/engines/registry.py lists them)."""

    name: str  # as --engine spells it
    label: str  # as people write it (vLLM, SGLang)
    options: tuple[Option, ...]  # its query options: a release pin ("release") and a serve line ("line")
    block_size: int | None = None  # its paged KV block where no backend forces one (None: its pick decides)
    long_context: str | None = None  # how it is told to serve past the model's max context (None: not recorded)
    boot_probe: str | None = None  # the probe whose boots its pool accounting is held to (their measurements)
    memory_flags: dict[str, str] = {}  # serve-line flags that move GPU memory kb does not model -> what they move
    # flags of older releases than kb records (no recorded parser has them) that moved GPU memory kb does not model;
    # a pasted line that still sets one is listed as unknown and its answer is made conditional the same way
    retired_memory_flags: dict[str, str] = {}
    boot_error_record: str | None = None  # the derived measurement of its accounting's error against those boots

    def unmodelled_memory(self, cx: Ctx) -> dict[str, str]:  # noqa: ARG002 (an engine's override reads it)
        """Serve-line settings whose GPU memory kb does not model for this query's model (a flag modelled for one
        kind of model and not another), flag -> what it moves; they make the answer conditional as memory_flags
        do (default: none)."""
        return {}

    def default_block_size(self, img: Image, q: Query) -> int | None:  # noqa: ARG002 (an engine's override reads them)
        """Its paged KV block for this query's release where no backend forces one (default: `block_size`)."""
        return self.block_size

    def gpus_per_replica(self, q: Query) -> int:
        """The GPUs one replica of this query uses (default: --gpus, the tensor-parallel size); an engine whose line
        sets pipeline stages multiplies them in."""
        return q.gpus

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

    def draft_release(self, kb: KB, img: Image, records: Path, root: Path,  # noqa: ARG002 (an engine's override)
                      release: str) -> ReleaseDraft | None:  # noqa: ARG002
        """Its engine-release record of `release` drafted from that release's own probe evidence under `records`
        (raw grids under `root`), as `kb probe sweep` writes it for a new release (None: it drafts none)."""
        return None

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

