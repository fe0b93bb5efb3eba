"""The store's threads: what held the writer thread, and how long, is told to its observer (the metric
``pai_store_writer_seconds``); the readers are not the writer and tell nothing."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Iterator

import pytest

from pai.launcher.storethread import StoreThread


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


async def test_a_call_here_runs_on_the_callers_thread_only_while_the_writer_is_idle(store: StoreThread) -> None:
    """``here``: the caller's thread stands in for the writer while it runs nothing and nothing waits for it (ADR
    0003, addendum 2); told to the observer as a writer call is. While the writer works, ``here`` refuses."""
    seen: list[str] = []
    store.observe = lambda call, seconds: seen.append(call)
    assert store.idle()
    assert store.here(threading.get_ident) == threading.get_ident()
    assert await store.call(threading.get_ident) != threading.get_ident()
    assert store.idle() and seen == ["get_ident", "get_ident"]
    busy, release = threading.Event(), threading.Event()
    held = asyncio.ensure_future(store.call(lambda: (busy.set(), release.wait(10))))
    queued = asyncio.ensure_future(store.call(Pass().run, 1))
    assert await asyncio.to_thread(busy.wait, 10)
    assert not store.idle()
    with pytest.raises(RuntimeError, match="busy"):
        store.here(Pass().run, 1)
    release.set()
    await held
    assert not store.idle() or queued.done()  # the queued call still counts until it has run
    assert await queued == 2
    assert store.idle()
    with pytest.raises(ValueError):
        await store.call(fails)
    assert store.idle()  # a failed call is finished too


async def test_a_call_first_goes_before_the_calls_waiting_and_after_the_one_running(store: StoreThread) -> None:
    """``call_first`` (a trial's reports): it waits for the call the writer runs, not for those given before it."""
    order: list[str] = []
    busy, release = threading.Event(), threading.Event()

    def running() -> None:
        busy.set()
        release.wait(10)
        order.append("running")

    held = asyncio.ensure_future(store.call(running))
    assert await asyncio.to_thread(busy.wait, 10)
    waiting = [asyncio.ensure_future(store.call(order.append, f"waiting {i}")) for i in range(2)]
    await asyncio.sleep(0)  # both handed to the writer's queue
    first = asyncio.ensure_future(store.call_first(order.append, "first"))
    later_first = asyncio.ensure_future(store.call_first(order.append, "first again"))
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(held, *waiting, first, later_first)
    assert order == ["running", "first", "first again", "waiting 0", "waiting 1"]
    assert store.idle()


async def test_a_call_first_to_an_idle_writer_runs_at_once_and_its_failure_is_the_callers(store: StoreThread) -> None:
    seen: list[str] = []
    store.observe = lambda call, seconds: seen.append(call)
    assert await store.call_first(Pass().run, 1) == 2
    with pytest.raises(ValueError):
        await store.call_first(fails)
    assert seen == ["Pass.run", "fails"] and store.idle()
