"""Serving engines behind one interface (design.md §3), as pre-commit keeps its languages: a protocol and a
registry of modules that implement it. The solver asks `get(q.engine)` and never branches on an engine's name.

An engine module says how the engine is pinned to a release (`pin_release`), its own order of preference among
its backends for a query (`priority`), what it decides about the answer once kb's kernel layer has spoken
(`decide`: its selection, the verdict and summary, the caveats of the backend it picks), the paged block size it
uses by default (`block_size`), which kernel caveats it already handles by default (`handled`) and the release
whose memory accounting sizes the pool (`release`), and its memory block (`memory`: the pool as the engine sizes
it at start-up).
"""

from __future__ import annotations

import importlib

from kbtool.vocab import ENGINES

TYPE_CHECKING = False
if TYPE_CHECKING:  # a warm query imports no typing (tests/test_imports.py): the protocol is for the type checker
    from typing import Any, Protocol

    from kbtool.solve.answer import BackendAnswer, KernelAnswer, Memory, Reason
    from kbtool.solve.context import Ctx
    from kbtool.solve.gates import Outcome
    from kbtool.solve.image import AcceleratorV, BackendV, Image


def module(name: str) -> str:
    """The module whose ENGINE implements Engine for `name`: kbtool/solve/NAME/engine.py (imported on first use)."""
    return f"kbtool.solve.{name}.engine"


if TYPE_CHECKING:

    class Engine(Protocol):
        name: str
        label: str  # the engine's name as people write it (vLLM, SGLang)
        release_flag: str  # the kb query option that pins its release (--vllm, --sglang)
        block_size: int | None  # the paged KV block size it uses where the backend does not force one

        def parse_line(self, text: str) -> Any:
            """Its pasted serve line (--NAME-args), parsed with its own flag names; bad values are UsageError."""

        def line_options(self, line: Any) -> dict[str, Any]:
            """kb's options (model, ctx, kv, gpus, util, block_size, dtype, ...) the line names, and kv_pasted: its
            --kv-cache-dtype as typed ("auto" included)."""

        def apply_line(self, q: Any, line: Any) -> None:
            """The line's engine-only settings onto the query."""

        def pin_release(self, img: Image, q: Any) -> None:
            """Fix the query's engine release (a usage error names the recorded ones)."""

        def priority(self, cx: Ctx, env: dict[str, Any]) -> list[str]:
            """Its backend ids in its own order of preference for this query."""

        def backend_outcome(self, cx: Ctx, backend: BackendV, env: dict[str, Any]) -> Outcome | None:
            """Its own verdict on one of its backends in this environment, or None: kb applies the backend's
            claims (vLLM); SGLang asks its resolution with that backend requested."""

        def handled(self, claim: str) -> str | None:
            """How it deals with a kernel caveat by default (the caveat is then shown as handled), or None."""

        def release(self, q: Any) -> str | None:
            """The release whose memory accounting sizes this query's pool (None: the one its boots measured)."""

        def memory(self, cx: Ctx, acc: AcceleratorV, env: dict[str, Any], kernels: list[KernelAnswer],
                   assumed: dict[str, Any]) -> tuple[Memory | None, list[str]]:
            """Its memory block for the model on this accelerator: its pool as it sizes it, and notes."""

        def decide(self, cx: Ctx, acc: AcceleratorV, envs: dict[str, dict[str, Any]], assumed: dict[str, Any],
                   verdict: str, summary: str, memory: Memory | None, backends: list[BackendAnswer],
                   kernels: list[KernelAnswer]) -> tuple[dict[str, Any] | None, str, str, list[Reason]]:
            """Its selection for this accelerator: (engine block of the answer, verdict, summary, caveats first)."""


_LOADED: dict[str, Engine] = {}


def get(name: str | None) -> Engine | None:
    """The engine named (None for "none" or no name)."""
    if not name or name == "none":
        return None
    eng = _LOADED.get(name)
    if eng is None:
        eng = _LOADED[name] = importlib.import_module(module(name)).ENGINE
    return eng


def names() -> list[str]:
    """The engines kb knows (kbtool/vocab.py ENGINES, less "none")."""
    return [e for e in ENGINES if e != "none"]
