from __future__ import annotations

import pytest

from kbtool.kb import KB
from tests.util import DATA, RECORDS, load_kb


@pytest.fixture(scope="session")
def fx() -> KB:
    return load_kb(DATA / "kb_fixture")


@pytest.fixture(scope="session")
def shipped() -> KB:
    return load_kb(RECORDS)
