"""YAML I/O. Reads use the fast safe path (reader.py); edits use round-trip loading (writer.py)."""
