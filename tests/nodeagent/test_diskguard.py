"""Writes that fail for want of disk: whose fault an exit is (a table), what the node's health says (a table), one
warning line per kind of failure, and the problems' kinds as both sides read them."""

from __future__ import annotations

import errno
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from pai.nodeagent.diskguard import DiskGuard, Throttle, attribute, disk_errno
from pai.nodeagent.health import DiskError, disk_problem, with_disk
from pai.nodeagent.logfmt import bind
from pai.protocol import PlatformExit
from pai.protocol.problems import ProblemKind, disk_sickness, kind_of

SICK = "disk full: work directory /w: 0 MB free of 64 MB"


@dataclass(frozen=True)
class Exit:
    name: str
    code: int
    sickness: str | None
    culprit: bool
    expected: int
    words: str = ""


EXITS = [
    Exit("a user's failure on a healthy node stays the user's", 3, None, False, 3),
    Exit("a success on a sick node stays a success", 0, SICK, False, 0),
    Exit("a failure on a sick node is the node's", 3, SICK, False, PlatformExit.NODE_DISK_FULL,
         "the task's own exit code was 3"),
    Exit("SIGTERM on a sick node is the node's, never the user's 143", 143, SICK, False,
         PlatformExit.NODE_DISK_FULL, "exited 143 (killed by SIGTERM) while the node was sick"),
    Exit("the task that filled the disk keeps its own exit", 1, SICK, True, 1, "its exit stays its own"),
    Exit("a platform exit stays what it is", int(PlatformExit.PREEMPTED), SICK, False, PlatformExit.PREEMPTED),
    Exit("a user's stop stays a stop", int(PlatformExit.STOPPED), SICK, False, PlatformExit.STOPPED),
]


@pytest.mark.parametrize("case", EXITS, ids=lambda c: c.name)
def test_whose_fault_an_exit_is(case: Exit) -> None:
    reason = "killed by SIGTERM" if case.code == 143 else None
    code, said = attribute(case.code, reason, case.sickness, case.culprit)
    assert code == case.expected
    assert case.words in (said or "")


@dataclass(frozen=True)
class Disk:
    name: str
    min_free_mb: int
    recent: DiskError | None
    kind: ProblemKind | None
    words: str = ""


DISKS = [
    Disk("healthy", 0, None, None),
    Disk("below the operator's minimum", 10**9, None, ProblemKind.LOW_DISK, "below 1000000000 MB"),
    Disk("a write met ENOSPC lately", 0, DiskError(errno.ENOSPC, "the lease", 0.0), ProblemKind.DISK_FULL,
         "(a write failed lately: No space left on device)"),
    Disk("a write met EDQUOT lately", 0, DiskError(errno.EDQUOT, "attempt record", 0.0), ProblemKind.DISK_FULL),
    Disk("a write met EROFS lately", 0, DiskError(errno.EROFS, "the lease", 0.0), ProblemKind.READ_ONLY,
         "is read-only ("),
]


@pytest.mark.parametrize("case", DISKS, ids=lambda c: c.name)
def test_what_the_nodes_health_says_of_its_disk(tmp_path: Path, case: Disk) -> None:
    found = disk_problem(tmp_path, case.min_free_mb, case.recent)
    if case.kind is None:
        assert found is None
        return
    assert found is not None and kind_of(found) is case.kind and case.words in found
    usage = shutil.disk_usage(tmp_path)
    assert f"work directory {tmp_path}" in found and f"of {usage.total >> 20} MB" in found


@pytest.mark.parametrize(("text", "kind"), [
    pytest.param(SICK, ProblemKind.DISK_FULL, id="disk full"),
    pytest.param("read-only: work directory /w is read-only", ProblemKind.READ_ONLY, id="read-only"),
    pytest.param("engine down: the Docker Engine does not answer", ProblemKind.ENGINE_DOWN, id="engine"),
    pytest.param("work directory /w: 10 MB free, below 1024 MB", ProblemKind.OTHER, id="an older agent's words"),
    pytest.param("disk fullish: nonsense", ProblemKind.OTHER, id="no known kind"),
])
def test_problems_are_read_by_their_kind(text: str, kind: ProblemKind) -> None:
    assert kind_of(text) is kind
    assert (disk_sickness([text]) == text) is (kind in (ProblemKind.DISK_FULL, ProblemKind.READ_ONLY))


def test_a_disk_problem_replaces_the_last_one_and_leaves_the_others() -> None:
    engine = "engine down: the Docker Engine does not answer: refused"
    low = "low disk: work directory /w: 100 MB free of 64000 MB, below 1024 MB"
    assert with_disk((low, engine), SICK) == (SICK, engine)
    assert with_disk((SICK, engine), None) == (engine,)


def test_a_disk_error_is_found_through_the_errors_it_caused() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as e:
            raise RuntimeError("copy failed") from e
    except RuntimeError as wrapped:
        assert disk_errno(wrapped) == errno.ENOSPC
    assert disk_errno(PermissionError(errno.EACCES, "denied")) is None
    assert disk_errno(ValueError("no")) is None


def test_a_thousand_failures_make_one_line_and_one_alarm_each(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "pai")
    alarms: list[None] = []
    guard = DiskGuard(tmp_path, bind(logging.getLogger("pai.nodeagent"), node="n1"), lambda: alarms.append(None))
    for _ in range(1000):
        assert guard.failed("the lease", OSError(errno.ENOSPC, "No space left on device"))
        assert guard.failed("attempt record", OSError(errno.ENOSPC, "No space left on device"))
    assert not guard.failed("the lease", PermissionError(errno.EACCES, "Permission denied"))
    lines = [r for r in caplog.records if r.getMessage() == "cannot write to the work directory"]
    assert [(r.what, r.errno) for r in lines] == [("the lease", "ENOSPC"), ("attempt record", "ENOSPC")]  # type: ignore[attr-defined]
    assert len(alarms) == 2000 and guard.failures == {("the lease", "ENOSPC"): 1000, ("attempt record", "ENOSPC"): 1000}
    recent = guard.recent()
    assert recent is not None and recent.what == "attempt record" and guard.sickness() is not None


def test_the_throttle_says_how_many_it_held_back() -> None:
    throttle = Throttle(interval=60)
    assert throttle.allow("k", 0.0) == 0
    assert [throttle.allow("k", t) for t in (1.0, 2.0, 59.0)] == [None, None, None]
    assert throttle.allow("other", 3.0) == 0
    assert throttle.allow("k", 61.0) == 3
