"""StoreThread: reads go first. The writer (and the threads parsing submissions) let the reads in flight when they are
given work finish first, for at most ``read_priority`` seconds; reads begun later do not hold them up."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable

import pytest

from pai.launcher.loop import StoreThread
from tests.eventually import eventually

HOLD = 0.3  # how long a held read gives a write that should wait for it the chance not to
GIVE_UP = 10.0  # a held read's own limit (a test that fails does not hang)


@pytest.fixture
async def store() -> AsyncIterator[StoreThread]:
    s = StoreThread(read_priority=2 * GIVE_UP)  # longer than a held read: a wrong wait shows in the order
    yield s
    s.close()


class Journal:
    """What happened, in order, across the threads."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self._lock = threading.Lock()

    def note(self, event: str) -> str:
        with self._lock:
            self.events.append(event)
        return event


def held_read(journal: Journal, name: str, until: threading.Event) -> Callable[[], str]:
    def read() -> str:
        journal.note(f"{name} began")
        until.wait(GIVE_UP)
        return journal.note(f"{name} ended")
    return read


def write(journal: Journal, done: threading.Event | None = None) -> Callable[[], str]:
    def fn() -> str:
        journal.note("write")
        if done is not None:
            done.set()
        return "written"
    return fn


async def give(store: StoreThread, kind: str, fn: Callable[[], str]) -> str:
    return await (store.call(fn) if kind == "call" else store.behind_reads(fn))


@pytest.mark.parametrize("kind", ["call", "behind_reads"])
async def test_work_given_during_a_read_waits_for_it(store: StoreThread, kind: str) -> None:
    journal, release = Journal(), threading.Event()
    read = asyncio.create_task(store.read(held_read(journal, "read", release)))
    await eventually(lambda: "read began" in journal.events, what="the read to begin")
    written = asyncio.create_task(give(store, kind, write(journal)))
    await asyncio.sleep(HOLD)  # the write's chance to run too early
    assert journal.events == ["read began"]
    release.set()
    await asyncio.gather(read, written)
    assert journal.events == ["read began", "read ended", "write"]


async def test_the_writer_waits_no_longer_than_read_priority(store: StoreThread) -> None:
    store.read_priority = 0.05
    journal, wrote = Journal(), threading.Event()
    read = asyncio.create_task(store.read(held_read(journal, "read", wrote)))
    await eventually(lambda: "read began" in journal.events, what="the read to begin")
    await store.call(write(journal, wrote))
    await read
    assert journal.events == ["read began", "write", "read ended"]


async def test_reads_begun_after_the_writer_was_given_work_do_not_hold_it(store: StoreThread) -> None:
    journal, first_done, wrote = Journal(), threading.Event(), threading.Event()
    first = asyncio.create_task(store.read(held_read(journal, "first", first_done)))
    await eventually(lambda: "first began" in journal.events, what="the first read to begin")
    written = asyncio.create_task(store.call(write(journal, wrote)))
    await asyncio.sleep(0)  # the write is handed to the writer thread before the second read begins
    second = asyncio.create_task(store.read(held_read(journal, "second", wrote)))
    await eventually(lambda: "second began" in journal.events, what="the second read to begin")
    first_done.set()
    await asyncio.gather(first, written, second)
    assert journal.events == ["first began", "second began", "first ended", "write", "second ended"]


async def test_a_failed_read_does_not_hold_the_writer(store: StoreThread) -> None:
    def fails() -> None:
        raise RuntimeError("broken read")

    with pytest.raises(RuntimeError):
        await store.read(fails)
    assert await asyncio.wait_for(store.call(write(Journal())), timeout=GIVE_UP / 2) == "written"
