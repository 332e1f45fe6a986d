from __future__ import annotations

import pytest

from kbtool.kb import KB
from kbtool.solve.load import load_kb
from tests.util import DATA, RECORDS


@pytest.fixture(scope="session")
def fx() -> KB:
    return load_kb(DATA / "kb_fixture")


@pytest.fixture(scope="session")
def shipped() -> KB:
    return load_kb(RECORDS)
