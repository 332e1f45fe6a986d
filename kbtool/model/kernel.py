"""Kernel: an attention implementation or one library path; its gates are claims whose subject it is."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Record, Ref, Strict, Version

Phase = Literal["prefill", "decode"]

Layout = Literal["mha", "gqa", "mqa", "mla", "sparse-mla"]


class KvFormat(Strict):
    """A KV-cache layout the kernel reads that is not a plain dtype (e.g. FlashMLA's fp8 latent with scales)."""

    name: str = Field(min_length=1, description="The layout's name as engines spell it, e.g. fp8_ds_mla")
    bytes_per_token: int = Field(ge=1, description="Bytes one token takes in one layer's cache")
    source: int = Field(ge=0, description="Index into the record's sources: where the layout is specified")
    notes: str | None = Field(default=None, description="What the bytes hold, in our words")


class CudaToolkits(Strict):
    """The CUDA toolkits the library's released wheels are built for."""

    versions: list[Version] = Field(min_length=1, description="CUDA toolkit versions, e.g. 12.9")
    source: int = Field(ge=0, description="Index into the record's sources: where the library lists them")


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
    cuda_toolkits: CudaToolkits | None = Field(
        default=None, description="The CUDA toolkits its latest release's wheels are built for (the `--assume "
        "typical` CUDA is the newest of the oldest toolkit of each kernel that lists them)")
    kv_formats: list[KvFormat] = Field(
        default_factory=list, description="KV-cache layouts it reads that are not a plain dtype, with their size")

    def refs(self) -> list[tuple[str, str]]:
        out = []
        if self.variant_of:
            out.append(("variant_of", self.variant_of))
        if self.supersedes:
            out.append(("supersedes", self.supersedes))
        return out
