from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pai.store.db import Database
from tests.store.conftest import make_database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with make_database("sqlite", tmp_path) as d:
        yield d
