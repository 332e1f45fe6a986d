"""Seed 001's record survives `kb topic import` then `kb topic export` with every field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kbtool.errors import InvalidRecordError
from kbtool.kb import KB
from kbtool.model.common import Source
from kbtool.model.topic import Topic
from kbtool.topic import convert
from tests.topic.helpers import load, tree
from tests.util import DATA, run_kb

SEED_FILE = DATA / "topics" / "seed-001.yaml"
SOURCE = Source(type="seed", seed="001_cecac612a9e92bba.txt")


def _seed() -> dict[str, object]:
    return dict(yaml.safe_load(SEED_FILE.read_text()))


def test_transcription_holds_every_field_of_the_format() -> None:
    assert set(_seed()) == set(convert.FORMAT_KEYS) - {"affected_by_hardware"}


def test_import_then_export_gives_the_seed_back() -> None:
    data = _seed()
    t = convert.import_topic(data, source=SOURCE)
    assert convert.export_topic(t) == data


def test_import_keeps_fields_in_kb_spelling() -> None:
    t = convert.import_topic(_seed(), source=SOURCE, topic_id="long-context-attention-kernel-matrix")
    assert t.original_id == "flops/ctx-long-context-attention-kernel-matrix"
    assert t.topic_class == "custom_kernel" and t.bound_by == "compute" and t.area == "inference/research"
    assert t.stated is not None and (t.stated.status, t.stated.level, t.stated.confidence, t.stated.updated) == (
        "verified", "medium", 0.82, "2026-10-05")
    assert t.hardware_parameters[0].parameter == "tmem-capacity"
    assert t.id_map["tmem-capacity"] == "tmem_capacity"
    assert len(t.scales_with) == 5 and len(t.workarounds) == 5
    assert t.cross_references[0].group == "Hardware-dependent" and t.cross_references[0].count == 5
    assert set(t.xrefs()) == {"attn-regime-map-context-batch", "attn-mla-kernel-support-matrix",
                              "ctx-kv-cache-gib-at-claimed-context"}
    assert t.statements and all(s.claims == [] for s in t.statements)
    assert {s.origin for s in t.statements} == {"arithmetic_intensity", "notes"}


def test_imported_record_is_a_valid_record_and_round_trips_through_a_file(tmp_path: Path) -> None:
    t = convert.import_topic(_seed(), source=SOURCE, topic_id="imported")
    root = tree(tmp_path)
    dest = convert.write_record(t, root)
    assert dest == root / "topics" / "imported.yaml"
    kb = load(root)
    again = kb.get("imported")
    assert isinstance(again, Topic) and again == t
    assert convert.export_topic(again) == _seed()
    with pytest.raises(Exception, match="exists"):
        convert.write_record(t, root)


def test_alias_ids_are_mapped_and_written_back() -> None:
    kb = KB()
    kb.aliases["nvidia-gb200-nvl72"] = "nvidia-gb200"
    t = convert.import_topic(_seed(), source=SOURCE, kb=kb)
    assert "nvidia-gb200" in t.hardware_parameters[0].values_for
    assert t.id_map["nvidia-gb200"] == "nvidia-gb200-nvl72"
    assert convert.export_topic(t) == _seed()


def test_json_input_and_output(tmp_path: Path) -> None:
    src = tmp_path / "seed.json"
    src.write_text(json.dumps(_seed()))
    data = convert.read_format(src)
    t = convert.import_topic(data, source=SOURCE)
    assert json.loads(convert.dump(convert.export_topic(t), "json")) == _seed()


def test_unknown_field_is_a_located_error() -> None:
    bad = {**_seed(), "colour": "blue"}
    with pytest.raises(InvalidRecordError, match="colour"):
        convert.import_topic(bad, source=SOURCE)


def test_cli_import_and_export(tmp_path: Path) -> None:
    root = tree(tmp_path)
    r = run_kb("topic", "import", str(SEED_FILE), "--seed", "001_cecac612a9e92bba.txt", "--id", "lc", "--write",
               "--kb", str(root))
    assert r.code == 0, r.err
    assert (root / "topics" / "lc.yaml").is_file()
    r = run_kb("topic", "export", "lc", "--kb", str(root))
    assert r.code == 0, r.err
    assert yaml.safe_load(r.out) == _seed()
    r = run_kb("topic", "export", "lc", "--derived", "--format", "json", "--kb", str(root))
    assert json.loads(r.out)["verification"] == {"status": "unverified", "level": "low", "confidence": 0.5}


def test_cli_bad_input_has_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\nscales_with: 3\n")
    r = run_kb("topic", "import", str(bad), "--kb", str(tree(tmp_path)))
    assert r.code in (1, 2) and "Traceback" not in r.err and "scales_with" in r.err
    r = run_kb("topic", "import", str(tmp_path / "missing.yaml"), "--kb", str(tree(tmp_path)))
    assert r.code == 2 and "no such file" in r.err
    (tmp_path / "list.json").write_text("[1, 2]")
    r = run_kb("topic", "import", str(tmp_path / "list.json"), "--kb", str(tree(tmp_path)))
    assert r.code == 1 and "mapping" in r.err
