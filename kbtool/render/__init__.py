"""Renderers: text (rich) and JSON. Only this package and cli.py import rich."""
