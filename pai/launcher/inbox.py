"""What the leading launcher heard from other processes (``pai.store.wakeups``), handed from the thread that heard
it to the writer thread that acts on it.

The notifications arrive on the event loop (``pai.launcher.listener``) while a scheduling pass may be running on the
store's writer thread. The pass's state is not made for two threads: ``Scheduling.take_changed`` swaps its set of
changed jobs and ``rebuild`` clears it, so a job marked from the event loop in the middle of a full pass would be
forgotten (and only the next reload would find it); ``Heartbeats.forget`` is read-modify-write on the writer
thread's own counters. So ``Inbox.put`` only queues (thread-safe), and the pass takes everything queued before it
opens its transaction (``take``): the writes it was told of have committed by then, so the pass reads them.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable
from dataclasses import dataclass

from pai.store.wakeups import CLUSTER, JOB, NODE, Wakeup


@dataclass(frozen=True, slots=True)
class Heard:
    """Everything heard since the last ``take``."""

    jobs: frozenset[str] = frozenset()  # ids of jobs submitted, stopped or given another priority
    nodes: frozenset[str] = frozenset()  # nodes cordoned, drained or uncordoned
    cluster: bool = False  # the configuration changed
    reset: bool = False  # notifications may have been missed (the listener reconnected): reload everything

    def __bool__(self) -> bool:
        return bool(self.jobs or self.nodes or self.cluster or self.reset)


def gather(items: Iterable[Wakeup | None]) -> Heard:
    """The wake-ups (None: a reset) as one ``Heard``."""
    jobs: set[str] = set()
    nodes: set[str] = set()
    cluster = reset = False
    for item in items:
        if item is None:
            reset = True
        elif item.kind == JOB:
            jobs.add(item.key)
        elif item.kind == NODE:
            nodes.add(item.key)
        elif item.kind == CLUSTER:
            cluster = True
    return Heard(frozenset(jobs), frozenset(nodes), cluster, reset)


class Inbox:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Wakeup | None] = queue.SimpleQueue()

    def put(self, wakeup: Wakeup | None) -> None:
        """From any thread: ``wakeup`` heard, or None when notifications may have been missed."""
        self._queue.put(wakeup)

    def take(self) -> Heard:
        """Everything put so far (on the writer thread, before a pass)."""
        items: list[Wakeup | None] = []
        try:
            while True:
                items.append(self._queue.get_nowait())
        except queue.Empty:
            pass
        return gather(items)
