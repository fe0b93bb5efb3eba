"""Heartbeats that change nothing, answered without the store.

In a steady cluster almost every heartbeat reports exactly what the master expects on its node: the same
attempts, all running, the same GPU health and problems. Such a heartbeat has nothing to reconcile, so it needs
no transaction: it is answered from memory (on the event loop, never queued behind a scheduling pass or another
node's heartbeat) and only its time is kept, written for all nodes in one statement per loop tick by
``Launcher.check_nodes``, which judges silence from it.

What a quiet heartbeat must look like is learnt per node from a heartbeat the store handled and found nothing to
do for (no event, no command, every expected attempt running and reported). It is forgotten whenever anything
about the node or a task on it changes: the launcher's one path for job changes (``Launcher._apply``), a node's
registration, admin state change or loss, and at every full scheduling pass, the safety net. A forgotten node's
next heartbeat goes through the store, reconciles as always, and teaches the view again.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pai.domain.states import TaskState
from pai.protocol.messages import ContainerReport, ContainerStatus, HeartbeatRequest


def all_running(reports: Sequence[ContainerReport], attempts: Collection[str]) -> bool:
    """The quiet test: ``reports`` are exactly ``attempts``, each reported once and RUNNING."""
    return (
        len(reports) == len(attempts)
        and all(r.status is ContainerStatus.RUNNING and r.attempt_id in attempts for r in reports)
        and len({r.attempt_id for r in reports}) == len(attempts)
    )


def quiet_attempts(reports: Sequence[ContainerReport], expected: Mapping[str, TaskState],
                   acted: bool) -> frozenset[str] | None:
    """After the store handled a heartbeat: the attempts a quiet view of its node expects (``expected``: the
    master's live attempts there and their states; ``acted``: the heartbeat made an event or a command), or None
    when it needed something: it was acted on, or an expected attempt is not RUNNING on both sides."""
    if acted or any(st is not TaskState.RUNNING for st in expected.values()) or not all_running(reports, expected):
        return None
    return frozenset(expected)


@dataclass(frozen=True, slots=True)
class Quiet:
    """What a heartbeat of one node must report to need nothing."""

    failed_gpus: tuple[int, ...]
    problems: tuple[str, ...]
    attempts: frozenset[str]  # every one RUNNING, on the master's side and the agent's

    def matches(self, req: HeartbeatRequest) -> bool:
        return (all_running(req.containers, self.attempts)
                and req.problems == self.problems and req.failed_gpus == self.failed_gpus)


class Heartbeats:
    """The quiet view of each node, and the times of the heartbeats that arrived (not yet stored).

    Read on the event loop, changed on the store's writer thread: each node's view is one immutable value, so a
    heartbeat sees it whole, before or after a change, and one answered just before a change is one that arrived
    before it. The times are guarded by a lock, so none is lost between an answer and ``take_beats``."""

    def __init__(self) -> None:
        self._quiet: dict[str, Quiet] = {}
        self._beats: dict[str, float] = {}
        self._lock = threading.Lock()
        self._epoch = 0  # counts forget_all
        self._forgotten: dict[str, int] = {}  # node -> how often it was forgotten

    def answer(self, req: HeartbeatRequest, now: float) -> bool:
        """Whether ``req`` reports exactly what its node's quiet view expects. Its time is kept either way: a node
        is alive when its heartbeat arrives, not when the writer thread gets to it (a heartbeat that waits behind
        a long transaction does not make its node LOST)."""
        self.arrived(req.node, now)
        return self.quiet(req)

    def arrived(self, node: str, now: float) -> None:
        """A message of ``node``'s agent arrived (a heartbeat, a registration): the node is alive at ``now``."""
        with self._lock:
            self._beats[node] = now

    def quiet(self, req: HeartbeatRequest) -> bool:
        """Whether ``req`` reports exactly what its node's quiet view expects (its time is not kept)."""
        view = self._quiet.get(req.node)
        return view is not None and view.matches(req)

    def token(self, node: str) -> tuple[int, int]:
        """Taken when a heartbeat of ``node`` is found to need nothing; ``learn`` compares it."""
        return self._epoch, self._forgotten.get(node, 0)

    def learn(self, node: str, quiet: Quiet, token: tuple[int, int]) -> None:
        """Called once the store's transaction for a heartbeat of ``node`` that needed nothing has committed; a
        view forgotten since ``token`` was taken (another heartbeat of the same transaction changed a job with a
        task on the node) is not learnt."""
        if token == self.token(node):
            self._quiet[node] = quiet

    def forget(self, nodes: Iterable[str]) -> None:
        for node in nodes:
            self._quiet.pop(node, None)
            self._forgotten[node] = self._forgotten.get(node, 0) + 1

    def forget_all(self) -> None:
        self._quiet.clear()
        self._epoch += 1

    def take_beats(self) -> dict[str, float]:
        """The time of the last heartbeat that arrived for each node, since the last call."""
        with self._lock:
            beats, self._beats = self._beats, {}
        return beats

    def pending(self, node: str) -> float | None:
        """The time of the last heartbeat of ``node`` that arrived and was not yet taken."""
        with self._lock:
            return self._beats.get(node)
