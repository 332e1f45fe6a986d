"""kbtool/checks/values.py: KB401 and KB402 on the fixture KB, each with one record broken."""

from __future__ import annotations

from kbtool.checks.values import find_bad_values, find_unknown_condition_values
from kbtool.kb import KB
from tests.checks.fixture import kb_with, records

CLAIM = "eng-gqa-block"


def test_the_fixture_is_clean() -> None:
    kb = KB.from_records(list(records()))
    assert find_bad_values(kb) == find_unknown_condition_values(kb) == []


def test_a_condition_on_no_query_variable() -> None:
    (f,) = find_bad_values(kb_with(CLAIM, requires={"var": "blok_size", "in": [16]}))
    assert (f.code, f.message, f.path) == ("KB401", "'blok_size' is not a query variable", "$.requires.var")


def test_a_condition_value_that_names_no_architecture() -> None:
    found = find_unknown_condition_values(kb_with(CLAIM, when={"var": "sm", "in": ["sm91"]}))
    assert [f.code for f in found] == ["KB402"] and "sm91" in found[0].message


def test_control_characters_in_record_strings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from kbtool.checks.values import find_control_characters
    from kbtool.store.records import load_tree
    from tests.util import DATA

    root = tmp_path / "records"
    shutil.copytree(DATA / "kb_fixture", root)
    assert find_control_characters(KB.from_load(load_tree(root))) == []
    rec = sorted((root / "models").glob("*.yaml"))[0]
    rec.write_text(rec.read_text() + 'notes: "C1 \\x9b2J and ESC \\e]0;t"\n')
    (f,) = find_control_characters(KB.from_load(load_tree(root)))
    assert (f.code, f.path, f.message) == ("KB404", "$.notes",
                                           "control character \\x9b in a string: 'C1 \\x9b2J and ESC \\x1b]0;t'")
    assert find_control_characters(KB.from_load(load_tree(root))) == [f]  # read again (from the parse cache)
