"""A third engine, as small as the contract allows: what adding an engine takes (CONTRIBUTING.md, "Add an engine").
It serves the first backend of its own records that passes their claims, sizes no memory (None: the answer says
the pool is not computed) and reads its serve line as `trtllm-serve MODEL [--tp_size N] [--max_seq_len N]`."""

from __future__ import annotations

import shlex
from typing import Any

from kbtool.errors import UsageError
from kbtool.solve.engines.base import Engine
from kbtool.solve.engines.results import Line, Option, Pick


class Stub(Engine):
    name = "trtllm"
    label = "TensorRT-LLM"
    options = (Option("--trtllm", "release", "VERSION", "Stub engine's release."),
               Option("--trtllm-args", "line", "CMD", "A trtllm-serve command (stub)."))
    block_size = 32

    def parse_line(self, text: str, release: str | None = None) -> Line:
        words = shlex.split(text)
        if words[:1] == ["trtllm-serve"]:
            words = words[1:]
        opts: dict[str, Any] = {"model": words[0] if words and not words[0].startswith("-") else None}
        ignored: list[str] = []
        flags = {"--tp_size": "gpus", "--max_seq_len": "ctx"}
        i = 1 if opts["model"] else 0
        while i < len(words):
            key = flags.get(words[i])
            if key is None:
                ignored.append(words[i])
                i += 1
                continue
            if i + 1 >= len(words) or not words[i + 1].isdigit():
                raise UsageError(f"--trtllm-args: {words[i]} takes a number", fix=f"e.g. {words[i]} 2")
            opts[key] = int(words[i + 1]) if key == "gpus" else words[i + 1]
            i += 2
        return Line(self.name, opts, {}, ignored)

    def apply_line(self, q: Any, line: Line) -> None:
        q.settings, q.ignored = dict(line.settings), list(line.ignored)

    def pin_release(self, img: Any, q: Any) -> None:
        q.release = q.release or "1.0"

    def priority(self, cx: Any, env: dict[str, Any]) -> list[str]:
        return [b.id for b in cx.backends]

    def backend_outcome(self, cx: Any, backend: Any, env: dict[str, Any]) -> Any:
        return None

    def memory(self, cx: Any, acc: Any, env: dict[str, Any], assumed: dict[str, Any]) -> Any:
        return None

    def pick(self, cx: Any, acc: Any, envs: dict[str, dict[str, Any]], assumed: dict[str, Any], memory: Any,
             backends: list[Any], kernels: list[Any]) -> Pick | None:
        common: dict[str, Any] = {"engine": self.name, "label": f"{self.label} {cx.q.release}",
                                  "release": cx.q.release}
        good = [b for b in backends if b.engine_status in ("ok", "caveat")]
        if not good:
            return Pick(state="error", error="no backend accepts this configuration", error_type="RuntimeError",
                        **common)
        return Pick(state="selected", selected=good[0].id, prefill=good[0].backend_name,
                    decode=good[0].backend_name, page_size=self.block_size, **common)
