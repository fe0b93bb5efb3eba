from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from pai.nodeagent import process_group
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.protocol import ContainerReport
from tests.nodeagent.fake_master import FakeMaster


class Groups:
    """Process groups started by a test; whatever is left of them is killed at the end."""

    def __init__(self) -> None:
        self.pgids: set[int] = set()

    def add(self, pgid: int | None) -> int:
        assert pgid is not None
        self.pgids.add(pgid)
        return pgid


@pytest.fixture
def groups() -> Iterator[Groups]:
    g = Groups()
    yield g
    for pgid in g.pgids:
        if process_group.group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)


@pytest.fixture
def exits() -> list[ContainerReport]:
    return []


@pytest.fixture
async def runtime(tmp_path: Path, exits: list[ContainerReport]) -> AsyncIterator[ProcessRuntime]:
    rt = await ProcessRuntime.open(tmp_path / "state", exits.append)
    yield rt
    await rt.close()


@pytest.fixture
async def master() -> AsyncIterator[FakeMaster]:
    """A fake master (it stands for the master in agent tests), started."""
    m = FakeMaster()
    await m.start()
    yield m
    await m.close()
