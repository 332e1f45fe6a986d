"""Hardware parameter: the definition of a quantity and which records carry its values."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Record


class HardwareParameter(Record):
    kind: Literal["hardware-parameter"] = Field(description="Record kind")
    unit: str = Field(description="Unit of the values: count, GB, TB/s, MB, KiB, TFLOP/s")
    meaning: str = Field(description="What the quantity is, in one or two sentences")
    held_by: Literal["accelerator", "architecture"] = Field(description="Which record kind holds the values")
    field: str = Field(description="The field of that record kind that holds the value")
