"""JSON Schema per record kind, generated from the pydantic models and committed under schema/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbtool.model import MODELS, Record
from kbtool.paths import schema_dir

SCHEMA_BASE = "https://kb.invalid/schema/"


def generate(kind: str) -> dict[str, Any]:
    model = MODELS[kind]
    schema = model.model_json_schema(by_alias=True, mode="validation")
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{SCHEMA_BASE}{kind}.schema.json",
        **schema,
    }
    schema["title"] = f"kb {kind} record"
    import sys

    doc = model.__doc__ if model.__doc__ and model.__doc__ != Record.__doc__ else None
    doc = doc or sys.modules[model.__module__].__doc__ or kind
    schema["description"] = doc.strip().splitlines()[0]
    return schema


def render(schema: dict[str, Any]) -> str:
    return json.dumps(add_titles(schema), indent=2, sort_keys=False) + "\n"


def generated_files() -> dict[str, str]:
    """File name -> text for every schema kb ships."""
    from kbtool.schema_docs import render as render_docs

    out = {f"{kind}.schema.json": render(generate(kind)) for kind in MODELS}
    out |= {f"{kind}.md": render_docs(kind, add_titles(generate(kind))) for kind in MODELS}
    from kbtool.solve.answer import json_schema  # the query answer's schema, from the answer model itself

    out["query-answer.schema.json"] = render(json_schema())
    return out


def export(dest: Path | None = None) -> list[Path]:
    d = dest or schema_dir()
    d.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generated_files().items():
        p = d / name
        if not p.exists() or p.read_text() != text:
            p.write_text(text)
            written.append(p)
    return written


def drift(dest: Path | None = None) -> list[str]:
    """Names of committed schema files that differ from the models (or are missing)."""
    d = dest or schema_dir()
    return [name for name, text in generated_files().items()
            if not (d / name).exists() or (d / name).read_text() != text]


def load(kind: str, dest: Path | None = None) -> dict[str, Any]:
    d = dest or schema_dir()
    p = d / f"{kind}.schema.json"
    if p.exists():
        return dict(json.loads(p.read_text()))
    return generate(kind)


def _titled(name: str) -> str:
    return name.replace("_", " ").strip().capitalize()


def add_titles(schema: Any) -> Any:
    """Give every property a title (its name, humanized) where pydantic left none, e.g. on $ref fields."""
    if isinstance(schema, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            for key, prop in props.items():
                if isinstance(prop, dict) and "title" not in prop:
                    prop["title"] = _titled(key)
        for value in schema.values():
            add_titles(value)
    elif isinstance(schema, list):
        for value in schema:
            add_titles(value)
    return schema


def _rule(key: str, value: Any) -> bool:
    """A cross-field rule (kbtool.model.common.schema_rule) rather than a field: its properties are constraints."""
    if key in ("not", "if", "then", "else"):
        return True
    return key in ("anyOf", "oneOf", "allOf") and isinstance(value, list) and all(
        isinstance(x, dict) and ("required" in x or "if" in x) for x in value)


def untitled_properties(schema: Any, path: str = "#") -> list[str]:
    """JSON pointers of properties lacking a title or a description (should be none)."""
    out: list[str] = []
    if isinstance(schema, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            out += [f"{path}/properties/{k}" for k, p in props.items()
                    if not (isinstance(p, dict) and p.get("title") and p.get("description"))]
        for k, v in schema.items():
            if not _rule(k, v):
                out += untitled_properties(v, f"{path}/{k}")
    elif isinstance(schema, list):
        for i, v in enumerate(schema):
            out += untitled_properties(v, f"{path}/{i}")
    return out
