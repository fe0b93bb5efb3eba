"""The store's threads: what held the writer thread, and how long, is told to its observer (the metric
``pai_store_writer_seconds``); the readers are not the writer and tell nothing."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator

import pytest

from pai.launcher.loop import StoreThread


@pytest.fixture
def store() -> Iterator[StoreThread]:
    s = StoreThread(readers=1)
    yield s
    s.close()


def slow(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def fails() -> None:
    raise ValueError("no")


class Pass:
    def run(self, n: int) -> int:
        return n + 1


async def test_each_writer_call_is_told_by_its_function_with_its_time(store: StoreThread) -> None:
    seen: list[tuple[str, float]] = []
    store.observe = lambda call, seconds: seen.append((call, seconds))
    assert await store.call(slow, 0.05) == 0.05
    with pytest.raises(ValueError):
        await store.call(fails)  # a failed call held the writer too
    assert await store.call(functools.partial(slow, 0.0)) == 0.0
    assert await store.call(Pass().run, 1) == 2
    assert await store.read(slow, 0.0) == 0.0  # a reader: not the writer
    assert [call for call, _ in seen] == ["slow", "fails", "slow", "Pass.run"]
    assert seen[0][1] >= 0.05 > seen[2][1]


async def test_without_an_observer_a_call_is_only_run(store: StoreThread) -> None:
    assert store.observe is None
    assert await store.call(Pass().run, 41) == 42
