"""Engine priority: the order in which an engine tries its attention backends, per platform and release.

vLLM picks the first backend of the applicable list whose own checks pass (vllm/platforms/cuda.py). Each
list applies where its `when` holds; the first list that holds is the one the engine uses.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Condition, Record, Ref, Strict, VersionRange


class PriorityList(Strict):
    when: Condition | None = Field(default=None, description="Where this list applies (default: always)")
    order: list[Ref] = Field(min_length=1, description="Engine-backend records, most preferred first")
    notes: str | None = Field(default=None, description="Why the order is what it is, per the source")


class EnginePriority(Record):
    kind: Literal["engine-priority"] = Field(description="Record kind")
    engine: Literal["vllm", "sglang", "trtllm"] = Field(description="Serving engine")
    platform: Literal["cuda", "rocm"] = Field(description="The engine platform whose selection this is")
    scope: list[VersionRange] = Field(min_length=1, description="Engine releases these lists hold for")
    lists: list[PriorityList] = Field(min_length=1, description="Priority lists; the first whose `when` holds")

    def refs(self) -> list[tuple[str, str]]:
        return [("tries", b) for pl in self.lists for b in pl.order]
