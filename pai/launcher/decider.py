"""Where the searcher decides: a process of its own, beside the master's (issue 29's p99).

``pai.launcher.searcher.decide`` is pure Python (an Optuna study rebuilt and replayed) and takes tens of
milliseconds to a few hundred for an experiment of 100 trials. On a thread of the master it held the GIL against
the event loop and the writer thread in the very second that ASHA stops and replaces 70-80 trials, and its garbage
(an in-memory study's objects) went through the master's collector. Here it runs in one worker process: the
master's threads only pickle its arguments (the experiment and its trials, with their reports at the rungs) and
the ``SearchDecision`` back. The worker runs niced: where it shares a core with the master (one core, or a busy
machine), the reports' threads come first, which no thread under one GIL could be given.

The worker is forked from multiprocessing's fork server, which imports the searcher (Optuna) once: nothing is
started before the first decision (a master with no experiment pays nothing), and a test process that builds many
apps forks each app's worker from the same server. A worker that dies (the pool broken) is replaced at the next
decision; the one in flight fails, and the loop decides again at its next tick. The worker ends with the master:
at ``close``, or, if the master is killed, when a thread of the worker sees the master's pidfd readable; the fork
server then ends too (it lives as long as a child of it holds its "alive" pipe).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import select
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from pai.domain.experiment import Experiment, Trial

if TYPE_CHECKING:  # Optuna is imported by the worker, not by the master
    from pai.launcher.searcher import SearchDecision

log = logging.getLogger(__name__)
SEARCHER = "pai.launcher.searcher"
NICENESS = 10  # a CPU's share against the master's threads, both wanting it: about a tenth (the kernel's weights)


def _start_worker(master: int) -> None:
    """The worker's start: behind the master's threads for a CPU they both want (``NICENESS``), and ended when the
    master process ends, however it ends (a thread waits on its pidfd). Its parent is the fork server, which does
    not end before its children do: the worker, like every child of it, holds the fork server's "alive" pipe."""
    os.nice(NICENESS)
    try:
        watched = os.pidfd_open(master)
    except ProcessLookupError:  # the master went already
        os._exit(0)
    except (OSError, AttributeError):  # no pidfd (not Linux 5.3+): ended by ``close`` only
        return

    def watch() -> None:
        select.select([watched], [], [])  # readable once the master has exited
        os._exit(0)

    threading.Thread(target=watch, name="pai-searcher-master", daemon=True).start()


def _decide(experiment: Experiment, trials: Sequence[Trial], seed: int) -> tuple[SearchDecision, int]:
    """In the worker: the decision, and the pid that made it."""
    from pai.launcher.searcher import decide  # imported already (the fork server's preload)

    return decide(experiment, trials, seed), os.getpid()


class Decider:
    """``await decide(experiment, trials, seed)``: ``pai.launcher.searcher.decide`` in the worker process.
    ``worker_pid``: the pid of the worker that made the last decision (None before the first)."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self.worker_pid: int | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload([SEARCHER])  # the fork server is started once per process, with it
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_start_worker,
                                             initargs=(os.getpid(),))
        return self._pool

    async def decide(self, experiment: Experiment, trials: Sequence[Trial], seed: int) -> SearchDecision:
        pool = self._executor()
        try:
            decision, self.worker_pid = await asyncio.get_running_loop().run_in_executor(
                pool, _decide, experiment, tuple(trials), seed)
        except BrokenProcessPool:  # the worker died (killed, out of memory): a new one for the next decision
            log.warning("the searcher's process ended: it is started again pid=%s", self.worker_pid)
            self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        return decision

    def close(self) -> None:
        """Ends the worker (a decision in flight is awaited)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
