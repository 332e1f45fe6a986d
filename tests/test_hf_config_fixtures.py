"""tests/data/hf-configs: every fixture is a parseable config.json with a SOURCE.yaml that says where it was read."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.util import DATA

ROOT = DATA / "hf-configs"
DIRS = sorted(p for p in ROOT.iterdir() if p.is_dir())
REQUIRED = ("model", "repo", "path", "commit", "url", "date_read", "how")


def test_there_are_at_least_40_configs() -> None:
    assert len(DIRS) >= 40


@pytest.mark.parametrize("d", DIRS, ids=lambda p: p.name)
def test_fixture_has_config_and_source(d: Path) -> None:
    assert re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", d.name), f"{d.name}: directory names are kb model ids"
    config = json.loads((d / "config.json").read_text(encoding="utf-8"))
    assert isinstance(config, dict) and config, f"{d.name}: config.json is not a JSON object"
    assert "architectures" in config or "model_type" in config, f"{d.name}: not a model config"
    src = YAML(typ="safe").load((d / "SOURCE.yaml").read_text(encoding="utf-8"))
    missing = [k for k in REQUIRED if not src.get(k)]
    assert not missing, f"{d.name}: SOURCE.yaml lacks {missing}"
    assert re.fullmatch(r"[0-9a-f]{40}", str(src["commit"])), f"{d.name}: commit must be a full hash"
    assert src["url"].startswith("https://") and src["path"] in src["url"], f"{d.name}: url must point at the path"
    assert src.get("complete", True) in (True, False)
    if src.get("complete") is False:
        assert src.get("note"), f"{d.name}: an incomplete copy must say what it lacks"
