"""Kernel: an attention implementation or one library path; its gates are claims whose subject it is."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Record, Ref

Phase = Literal["prefill", "decode"]

Layout = Literal["mha", "gqa", "mqa", "mla", "sparse-mla"]


def _mha_gqa() -> list[Layout]:
    return ["mha", "gqa"]


class Kernel(Record):
    kind: Literal["kernel"] = Field(description="Record kind")
    library: str = Field(description="Library name used in version scopes: flash-attn, flashinfer, torch, ...")
    package: str | None = Field(default=None, description="pip package that provides it")
    repo: str | None = Field(default=None, description="owner/name of its repository")
    phases: list[Phase] = Field(min_length=1, description="prefill, decode or both")
    attention: list[Layout] = Field(
        default_factory=_mha_gqa, description="Attention layouts it implements"
    )
    variant_of: Ref | None = Field(default=None, description="The kernel family this path belongs to")
    supersedes: Ref | None = Field(default=None, description="Older kernel this one replaces")
    latest_version: str | None = Field(default=None, description="Newest release recorded in the KB")

    def refs(self) -> list[tuple[str, str]]:
        out = []
        if self.variant_of:
            out.append(("variant_of", self.variant_of))
        if self.supersedes:
            out.append(("supersedes", self.supersedes))
        return out
