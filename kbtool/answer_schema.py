"""JSON Schema of the query answer, committed as schema/query-answer.schema.json."""

from __future__ import annotations

from typing import Any

from kbtool.solve.answer import Answer, MultiAnswer


def _schema() -> dict[str, Any]:
    single = Answer.model_json_schema()
    multi = MultiAnswer.model_json_schema()
    defs = {**single.pop("$defs", {}), **multi.pop("$defs", {})}
    defs["Answer"] = single
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://kb.invalid/schema/query-answer.schema.json",
        "title": "kb query answer",
        "description": "What `kb query --json` prints: one answer, or one row per accelerator without --gpu.",
        "oneOf": [{"$ref": "#/$defs/Answer"}, {"$ref": "#/$defs/MultiAnswer"}],
        "$defs": {**defs, "MultiAnswer": multi},
    }


ANSWER_SCHEMA = _schema()
