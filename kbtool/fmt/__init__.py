"""`kb fmt`: the canonical form of record files (schema line, key order, quoting), kept by round-trip edits."""

from __future__ import annotations

from kbtool.fmt.core import canonical, records_root_of, schema_line
from kbtool.fmt.order import key_order, record_order

__all__ = ["canonical", "key_order", "record_order", "records_root_of", "schema_line"]
