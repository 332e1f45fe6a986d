"""Topics: derived verification (derive.py) and conversion from and to seed 001's format (convert.py)."""
