"""A running job that declares no duration ends, for the ETAs of waiting reasons, after the typical run time of its
user's jobs in its VC (pai.launcher.durations): read once per pair, carried from admission, renewed on full passes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.resources import Resources
from pai.domain.states import JobState
from pai.launcher import durations
from pai.launcher.service import Launcher, LauncherConfig
from pai.protocol.messages import NodeInfo, RegisterRequest
from pai.store import jobs
from pai.store.db import Database
from tests.dbkit import statements_of
from tests.launcher.builders import Clock, user
from tests.store import builders
from tests.store.conftest import make_database

START = 1000.0


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    with make_database("sqlite", tmp_path) as d:
        yield d


def spec(name: str, gpu: int, declared: float | None = None) -> JobSpec:
    role = TaskRoleSpec("w", 1, "sleep 600", Resources(gpu, 1, 1000))
    return JobSpec(name=name, task_roles=(role,), image="busybox", expected_seconds=declared)


_made = 0


def finished(db: Database, *seconds: float, who: str = "alice", vc: str = "default",
             state: JobState = JobState.SUCCEEDED) -> None:
    """Jobs of ``who`` in ``vc`` that ran ``seconds`` each and ended in ``state`` before START."""
    global _made
    with db.session() as s:
        for k, run in enumerate(seconds):
            _made += 1
            done = builders.job(f"done-{_made}", who, virtual_cluster=vc, state=state)
            jobs.insert_job(s, replace(done, started_at=START - 10_000 + k - run, completed_at=START - 10_000 + k),
                            "{}")


def launcher_with_a_running_job(db: Database, declared: float | None = None) -> tuple[Launcher, Clock]:
    """``alice~long`` holds 3 of n1's 4 GPUs since START, admitted by an incremental pass."""
    clock = Clock(START)
    launcher = Launcher(db, LauncherConfig(), clock=clock)
    launcher.register(RegisterRequest(NodeInfo("n1", "10.0.0.1", Resources(4, 16, 64_000))))
    launcher.schedule_pass()  # the first, full pass: nothing to run
    launcher.submit(user(), spec("long", 3, declared), "{}")
    assert [a.job for a in launcher.schedule_pass().admissions] == ["alice~long"]
    assert launcher.scheduling.full_passes == 1  # admitted by an incremental pass
    return launcher, clock


def unblock_of_next(launcher: Launcher, clock: Clock, *, full: bool = False) -> dict[str, Any]:
    """What would unblock ``alice~next`` (4 GPUs: it waits for ``alice~long``)."""
    if "alice~next" not in launcher.scheduling.ids:
        clock.now += 10
        launcher.submit(user(), spec("next", 4), "{}")
    figures: dict[str, Any] = launcher.schedule_pass(full=full).waiting["alice~next"].figures["unblock"]
    assert figures["jobs"] == ["alice~long"]
    return figures


@dataclass(frozen=True)
class Case:
    name: str
    runs: dict[str, tuple[float, ...]]  # "user/vc[/state]" -> run times of finished jobs
    declared: float | None
    eta: float | None
    source: str | None


CASES = [
    Case("the median of three successful runs", {"alice/default": (1000, 3000, 2000)}, None, START + 2000, "typical"),
    Case("a declared duration wins", {"alice/default": (1000, 3000, 2000)}, 500, START + 500, "declared"),
    Case("two runs: no time", {"alice/default": (1000, 3000)}, None, None, None),
    Case("another user's runs do not count", {"bob/default": (1000, 3000, 2000)}, None, None, None),
    Case("another VC's runs do not count", {"alice/prod": (1000, 3000, 2000)}, None, None, None),
    Case("failed runs do not count", {"alice/default/FAILED": (1000, 3000, 2000)}, None, None, None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_waiting_job_is_told_when_the_running_one_should_end(db: Database, case: Case) -> None:
    for where, runs in case.runs.items():
        who, vc, *state = where.split("/")
        finished(db, *runs, who=who, vc=vc, state=JobState(state[0]) if state else JobState.SUCCEEDED)
    launcher, clock = launcher_with_a_running_job(db, case.declared)
    for full in (False, True):  # the incremental scheduler (carried from admission), and a pass rebuilt from store
        got = unblock_of_next(launcher, clock, full=full)
        assert (got["eta"], got.get("etaFrom")) == (case.eta, case.source), f"full={full}"


def test_a_pair_is_read_once_and_renewed_on_a_full_pass_once_old(db: Database) -> None:
    finished(db, 1000, 3000, 2000)
    launcher, clock = launcher_with_a_running_job(db)
    typical = launcher.scheduling.durations
    assert typical.reads == 1  # (alice, default), when its first job was followed
    assert unblock_of_next(launcher, clock)["eta"] == START + 2000
    with statements_of(db.engine) as statements:
        clock.now += 10
        launcher.submit(user(), spec("more", 4), "{}")
        launcher.schedule_pass()
        launcher.schedule_pass(full=True)
    assert typical.reads == 1  # a known pair, not old yet: no read, incremental or full
    assert not [q for q in statements if "completed_at - jobs.started_at" in q], statements
    finished(db, 8000)  # runs 1000, 2000, 3000, 8000: typically 2500 now
    clock.now = START + durations.MAX_AGE_SECONDS - 1
    assert unblock_of_next(launcher, clock, full=True)["eta"] == START + 2000  # not old yet: kept
    clock.now = START + durations.MAX_AGE_SECONDS
    assert unblock_of_next(launcher, clock, full=True)["eta"] == START + 2500
    assert typical.reads == 2


def test_a_running_job_followed_again_keeps_its_typical_run_time(db: Database) -> None:
    """Its task reports running (the job changes, the pass follows it): the scheduler's form is the same."""
    finished(db, 1000, 3000, 2000)
    launcher, clock = launcher_with_a_running_job(db)
    inc = launcher.scheduling.inc
    assert inc is not None
    before = inc.running["alice~long"]
    assert (before.expected_seconds, before.expected_typical) == (2000, True)
    with db.session() as s:
        job = jobs.get_job(s, "alice~long")
    launcher.scheduling.follow([job])
    assert inc.running["alice~long"] == before
