"""kb: attention-kernel and accelerator capability records, a validating query engine and GPU probes."""

from __future__ import annotations

__version__ = "0.1.0"
