"""The searcher decides in a process of its own (``pai.launcher.decider``): the same decisions as in the master's
process, made by another pid (niced), and a worker that dies is replaced."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from pai.launcher import searcher
from pai.launcher.decider import NICENESS, Decider
from tests.eventually import eventually
from tests.launcher.test_searcher import CASES, Case

MASTER = """
import asyncio, sys
from pai.launcher.decider import Decider
from tests.launcher.test_searcher import CASES

async def main() -> None:
    decider = Decider()
    await decider.decide(CASES[0].experiment, CASES[0].trials, 1)
    print(decider.worker_pid, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


@pytest.fixture
async def decider() -> AsyncIterator[Decider]:
    d = Decider()
    yield d
    d.close()


async def test_the_worker_decides_as_the_searcher_does(decider: Decider) -> None:
    for case in CASES:
        assert await decider.decide(case.experiment, case.trials, 1) == searcher.decide(case.experiment, case.trials,
                                                                                         seed=1), case.name


async def test_the_decision_comes_from_another_process(decider: Decider, monkeypatch: pytest.MonkeyPatch) -> None:
    def not_here(*_: object) -> None:
        raise AssertionError("decided in the master's process")

    monkeypatch.setattr(searcher, "decide", not_here)  # in this process only: the worker has its own module
    case: Case = CASES[0]
    decision = await decider.decide(case.experiment, case.trials, 1)
    assert [t.number for t in decision.new_trials] == case.new
    assert decider.worker_pid is not None and decider.worker_pid != os.getpid()
    assert os.getpriority(os.PRIO_PROCESS, decider.worker_pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + NICENESS)
    first = decider.worker_pid
    await decider.decide(case.experiment, case.trials, 1)
    assert decider.worker_pid == first  # one worker, kept between decisions


async def test_a_dead_worker_is_replaced_at_the_next_decision(decider: Decider) -> None:
    case: Case = CASES[0]
    await decider.decide(case.experiment, case.trials, 1)
    dead = decider.worker_pid
    assert dead is not None
    os.kill(dead, signal.SIGKILL)
    with pytest.raises(BrokenProcessPool):  # the one in flight fails: the loop decides again at its next tick
        while True:  # the pool may hear of the death only once the next call is under way
            await decider.decide(case.experiment, case.trials, 1)
    decision = await decider.decide(case.experiment, case.trials, 1)
    assert [t.number for t in decision.new_trials] == case.new
    assert decider.worker_pid not in (None, dead)


async def test_closed_the_worker_ends(decider: Decider) -> None:
    case: Case = CASES[0]
    await decider.decide(case.experiment, case.trials, 1)
    pid = decider.worker_pid
    assert pid is not None
    decider.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # shutdown(wait=True) joined it: gone, not a zombie


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"  # ended, not reaped yet
    except FileNotFoundError:
        return True


async def test_the_worker_ends_when_its_master_is_killed() -> None:
    master = await asyncio.create_subprocess_exec(sys.executable, "-c", MASTER, stdout=asyncio.subprocess.PIPE,
                                                  env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert master.stdout is not None
    worker = int(await asyncio.wait_for(master.stdout.readline(), 60))
    assert not gone(worker)
    master.kill()  # no close(): SIGKILL
    await master.wait()
    await eventually(lambda: gone(worker), what="the searcher's worker ended with its master")
