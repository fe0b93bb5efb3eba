"""The job lifecycle as a pure state machine: ``on_event(job, event, ids) -> (job, commands)``.

The job's outcome is derived from its tasks every time (never remembered on the side), so replaying a
report is harmless and a restarted master reaches the same conclusion:

* a task that ended with a TRANSIENT exit (preempted, node lost, container lost): the job is requeued,
  not counted against its retries;
* a role with at least ``min_failed`` FAILED tasks: the job fails (or retries, if its budget allows);
* a role with at least ``min_succeeded`` SUCCEEDED tasks, or every task ended: the job succeeds.

Once an outcome is known, live tasks are stopped; the job reaches its final state when none is left.

Commands tell the shell what to record (attempt start/end, history events); agent start/stop commands
are derived level-triggered from the tasks' states (see ``reconcile``).

An elastic job (``extras.elastic``) changes its members when the scheduler resizes it (``Resized``): growth adds
tasks, bound and started as an admission's; a shrink stops the role's highest indices gracefully with code -402
(``Shrunk``), and drops each from the job once it has exited: never a failure, never a retry, no outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeVar

from pai.domain.job import Job, Placement, Task, initial_tasks
from pai.domain.jobspec import RETRY_ALWAYS, RETRY_UNLIMITED
from pai.domain.states import JobState, TaskState
from pai.launcher.exit_codes import Retry, classify
from pai.protocol.exitcodes import PlatformExit

IdSource = Callable[[], str]


# ---- events -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bound:
    role: str
    index: int
    node: str
    address: str
    ports: dict[str, tuple[int, ...]]
    gpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Admitted:
    now: float
    bindings: tuple[Bound, ...]


@dataclass(frozen=True, slots=True)
class Started:
    now: float
    attempt_id: str


@dataclass(frozen=True, slots=True)
class Exited:
    now: float
    attempt_id: str
    exit_code: int
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class StopRequested:
    now: float
    by: str


@dataclass(frozen=True, slots=True)
class Preempted:
    now: float
    preemptor: str
    rule: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class Resized:
    """The scheduler resized a role of a running elastic job (pai.vc.snapshot.Resize): ``bindings`` are the tasks
    it grows by (bound as an admission's), ``removed`` the indices it shrinks by."""

    now: float
    role: str
    size_to: int
    cause: str
    message: str
    bindings: tuple[Bound, ...] = ()
    removed: tuple[int, ...] = ()


Event = Admitted | Started | Exited | StopRequested | Preempted | Resized


# ---- commands -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttemptStarted:
    task: Task
    job_attempt: int


@dataclass(frozen=True, slots=True)
class AttemptRunning:
    task: Task


@dataclass(frozen=True, slots=True)
class AttemptEnded:
    task: Task


@dataclass(frozen=True, slots=True)
class Note:
    kind: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


Command = AttemptStarted | AttemptRunning | AttemptEnded | Note


class Outcome(StrEnum):
    REQUEUE = "requeue"
    FAIL = "fail"
    SUCCEED = "succeed"


def shrinking(t: Task) -> bool:
    """A task stopped because its elastic job shrank: leaving, dropped from the job once it exits."""
    return t.state is TaskState.STOPPING and t.exit_code == PlatformExit.SHRUNK


def _live(t: Task) -> bool:
    """A task with an attempt that has not ended (the states in which a placed task holds its node)."""
    return t.state.holds_node() and t.attempt_id is not None


# ---- the machine --------------------------------------------------------------------------------


def on_event(job: Job, event: Event, ids: IdSource) -> tuple[Job, list[Command]]:
    """Apply one event; returns the new job and what the shell must record."""
    cmds: list[Command] = []
    if isinstance(event, Admitted):
        job = _admit(job, event, ids, cmds)
    elif isinstance(event, Started):
        job = _started(job, event, cmds)
    elif isinstance(event, Exited):
        job = _exited(job, event, ids, cmds)
    elif isinstance(event, StopRequested):
        job = _stop(job, event, cmds)
    elif isinstance(event, Preempted):
        job = _preempt(job, event, cmds)
    elif isinstance(event, Resized):
        job = _resize(job, event, ids, cmds)
    job = _settle(job, event.now, cmds)
    return job, cmds


def _admit(job: Job, ev: Admitted, ids: IdSource, cmds: list[Command]) -> Job:
    """Bind the placed tasks and start their attempts. A gang is placed whole; a non-gang job (``gangAllocation:
    false``) may be placed in part, RUNNING from its first placement, its other tasks waiting (no node) for later
    passes, which place more of them while it runs."""
    more = job.state is JobState.RUNNING and not job.spec.gang
    if job.state is not JobState.WAITING and not more:
        return job
    by_key = {(b.role, b.index): b for b in ev.bindings}
    tasks = []
    elastic = {r.name for r in job.spec.task_roles if r.elastic is not None and r.elastic.resizable}
    for t in job.tasks:
        if job.spec.gang and t.role in elastic and (t.role, t.index) not in by_key:
            continue  # an elastic job admitted below the size it asks (at its minimum): not one of its members
        b = by_key[(t.role, t.index)] if job.spec.gang else by_key.get((t.role, t.index))
        if b is None or t.node is not None or t.state is not TaskState.WAITING:
            tasks.append(t)  # not placed by this admission (or already placed: a stale binding)
            continue
        nt = replace(
            t,
            state=t.state.to(TaskState.WAITING),
            node=b.node,
            address=b.address,
            ports=dict(b.ports),
            gpus=b.gpus,
            attempt_id=ids(),
            exit_code=None,
            exit_reason=None,
            started_at=None,
            finished_at=None,
        )
        tasks.append(nt)
        cmds.append(AttemptStarted(nt, job.attempt_index))
    nodes = sorted({b.node for b in ev.bindings})
    waiting = sum(1 for t in tasks if t.node is None)
    if job.spec.gang or (not more and not waiting):
        sizes = {r: (sum(1 for t in tasks if t.role == r), job.spec.role(r).instances) for r in sorted(elastic)}
        smaller = [f"{r} {n} of {asked}" for r, (n, asked) in sizes.items() if n < asked]
        at = f" (elastic: {', '.join(smaller)} asked)" if smaller else ""
        cmds.append(Note("admitted", f"admitted on {', '.join(nodes)}{at}", {"nodes": nodes}))
    else:
        placed = len(ev.bindings)
        cmds.append(Note("admitted", f"{placed} task{'s' if placed != 1 else ''} placed on {', '.join(nodes)}"
                         f" ({waiting} still waiting for a node; gangAllocation: false)",
                         {"nodes": nodes, "placed": placed, "waiting": waiting}))
    reason = job.waiting_reason if waiting else None
    if more:
        return replace(job, tasks=tuple(tasks), waiting_reason=reason)
    return job.with_state(JobState.RUNNING, tasks=tuple(tasks), started_at=ev.now, waiting_reason=reason)


def _find(job: Job, attempt_id: str) -> Task | None:
    for t in job.tasks:
        if t.attempt_id == attempt_id:
            return t
    return None


def _started(job: Job, ev: Started, cmds: list[Command]) -> Job:
    t = _find(job, ev.attempt_id)
    if t is None or t.state is not TaskState.WAITING:
        return job
    running = t.with_state(TaskState.RUNNING, started_at=ev.now)
    cmds.append(AttemptRunning(running))
    return job.with_task(running)


def _exited(job: Job, ev: Exited, ids: IdSource, cmds: list[Command]) -> Job:
    t = _find(job, ev.attempt_id)
    if t is None or not t.state.holds_node():
        return job  # a repeated or stale report
    if shrinking(t):
        # It left an elastic job that shrank: recorded as stopped, and no longer one of the job's tasks.
        cmds.append(AttemptEnded(t.with_state(TaskState.STOPPED, finished_at=ev.now)))
        return replace(job, tasks=tuple(x for x in job.tasks if x is not t))
    if t.state is TaskState.STOPPING:
        # We asked it to stop: it ends with the code we gave the stop (stopped, preempted, policy).
        code = t.exit_code if t.exit_code is not None else ev.exit_code
        ended = t.with_state(TaskState.STOPPED, exit_code=code, finished_at=ev.now)
        cmds.append(AttemptEnded(ended))
        return job.with_task(ended)
    if ev.exit_code == 0:
        ended = t.with_state(TaskState.SUCCEEDED, exit_code=0, exit_reason=ev.reason, finished_at=ev.now)
        cmds.append(AttemptEnded(ended))
        return job.with_task(ended)
    spec = classify(ev.exit_code)
    failed = t.with_state(TaskState.FAILED, exit_code=ev.exit_code, exit_reason=ev.reason, finished_at=ev.now)
    cmds.append(AttemptEnded(failed))
    role = job.spec.role(t.role)
    if spec.retry is Retry.UNKNOWN and t.retries < role.task_retry_count and job.state is JobState.RUNNING:
        # Task-level retry: a new attempt on the same node, with the same ports and GPUs.
        again = replace(
            failed,
            state=TaskState.WAITING,
            attempt_id=ids(),
            retries=t.retries + 1,
            exit_code=None,
            exit_reason=None,
            started_at=None,
            finished_at=None,
        )
        cmds.append(AttemptStarted(again, job.attempt_index))
        cmds.append(
            Note(
                "task-retried",
                f"task {t.role}[{t.index}] exited {ev.exit_code} ({spec.phrase}); retry {again.retries}"
                f" of {role.task_retry_count}",
                {"role": t.role, "index": t.index, "exitCode": ev.exit_code},
            )
        )
        return job.with_task(again)
    return job.with_task(failed)


def _stop_tasks(job: Job, code: int, reason: str) -> Job:
    tasks = tuple(
        t.with_state(TaskState.STOPPING, exit_code=code, exit_reason=reason)
        if _live(t) and t.state is not TaskState.STOPPING
        else t
        for t in job.tasks
    )
    return replace(job, tasks=tasks)


def _stop(job: Job, ev: StopRequested, cmds: list[Command]) -> Job:
    if job.state.is_terminal() or job.state is JobState.STOPPING:
        return job
    cmds.append(Note("stop-requested", f"stop requested by {ev.by}", {"by": ev.by}))
    if job.state is JobState.WAITING:
        return job.with_state(
            JobState.STOPPED, completed_at=ev.now, exit_code=int(PlatformExit.STOPPED), waiting_reason=None
        )
    job = _stop_tasks(job, int(PlatformExit.STOPPED), f"stopped by {ev.by}")
    return job.with_state(JobState.STOPPING, exit_code=int(PlatformExit.STOPPED))


def _preempt(job: Job, ev: Preempted, cmds: list[Command]) -> Job:
    if job.state is not JobState.RUNNING:
        return job
    msg = f"preempted by {ev.preemptor} under rule {ev.rule}" + (f": {ev.message}" if ev.message else "")
    cmds.append(Note("preempted", msg, {"preemptor": ev.preemptor, "rule": ev.rule}))
    return replace(_stop_tasks(job, int(PlatformExit.PREEMPTED), msg), preempted_by=ev.preemptor)


def _resize(job: Job, ev: Resized, ids: IdSource, cmds: list[Command]) -> Job:
    """Grow by the bound tasks (new indices only), or mark the removed indices to stop: live ones gracefully with
    -402, ones not placed dropped; one that already ended is left as it ended. A job not running ignores it."""
    if job.state is not JobState.RUNNING:
        return job
    have = {(t.role, t.index) for t in job.tasks}
    added: list[Task] = []
    for b in ev.bindings:
        if b.role != ev.role or (b.role, b.index) in have:
            continue  # a stale or repeated growth
        t = Task(b.role, b.index, node=b.node, address=b.address, ports=dict(b.ports), gpus=b.gpus, attempt_id=ids())
        added.append(t)
        cmds.append(AttemptStarted(t, job.attempt_index))
    gone = set(ev.removed)
    tasks: list[Task] = []
    for t in job.tasks:
        if t.role != ev.role or t.index not in gone:
            tasks.append(t)
        elif _live(t) and t.state is not TaskState.STOPPING:
            tasks.append(t.with_state(TaskState.STOPPING, exit_code=int(PlatformExit.SHRUNK), exit_reason=ev.message))
        elif t.node is not None or t.state is not TaskState.WAITING:
            tasks.append(t)  # already stopping or ended: as it is
    if not added and tasks == list(job.tasks):
        return job
    last = max((i for i, t in enumerate(tasks) if t.role == ev.role), default=len(tasks) - 1)
    tasks[last + 1:last + 1] = added
    details = {"role": ev.role, "size": ev.size_to, "cause": ev.cause,
               "added": [t.index for t in added], "removed": sorted(gone, reverse=True)}
    cmds.append(Note("resized", ev.message, details))
    return replace(job, tasks=tuple(tasks), last_resized_at=ev.now)


def outcome(job: Job) -> tuple[Outcome, Task | None] | None:
    """What the tasks' states say about the job (derived, never stored)."""
    for t in job.tasks:
        if t.state.is_terminal() and t.exit_code is not None and classify(t.exit_code).retry is Retry.TRANSIENT:
            return Outcome.REQUEUE, t
    for role in job.spec.task_roles:
        mine = [t for t in job.tasks if t.role == role.name]
        failed = [t for t in mine if t.state is TaskState.FAILED]
        if role.min_failed is not None and len(failed) >= role.min_failed:
            return Outcome.FAIL, failed[-1]
    for role in job.spec.task_roles:
        mine = [t for t in job.tasks if t.role == role.name]
        ok = sum(1 for t in mine if t.state is TaskState.SUCCEEDED)
        if role.min_succeeded is not None and ok >= role.min_succeeded:
            return Outcome.SUCCEED, None
    if job.tasks and all(t.state.is_terminal() for t in job.tasks):
        return Outcome.SUCCEED, None
    return None


def _settle(job: Job, now: float, cmds: list[Command]) -> Job:
    """Stop what is left once the outcome is known; finish the job when nothing is left."""
    if job.state is JobState.STOPPING:
        if not any(_live(t) for t in job.tasks):
            cmds.append(Note("stopped", "all tasks stopped"))
            return job.with_state(JobState.STOPPED, completed_at=now)
        return job
    if job.state is not JobState.RUNNING:
        return job
    out = outcome(job)
    if out is None:
        return job
    kind, culprit = out
    if any(_live(t) for t in job.tasks):
        return _stop_tasks(job, int(PlatformExit.COMPLETED_BY_POLICY), f"job will {kind.value}")
    if kind is Outcome.REQUEUE:
        assert culprit is not None
        cmds.append(Note("requeued", f"requeued after {culprit.role}[{culprit.index}] ended: "
                         f"{classify(culprit.exit_code or 0).reason} (not counted as a retry)"))
        return _requeue(job, counted=False)
    if kind is Outcome.SUCCEED:
        if job.spec.retry_count == RETRY_ALWAYS:
            cmds.append(Note("retried", f"job succeeded; {_retry_phrase(job)}"))
            return _requeue(job, counted=True)
        cmds.append(Note("succeeded", "job succeeded"))
        return job.with_state(JobState.SUCCEEDED, completed_at=now, exit_code=0)
    assert culprit is not None and culprit.exit_code is not None
    spec = classify(culprit.exit_code)
    if _may_retry(job, spec.retry):
        cmds.append(Note("retried", f"{culprit.role}[{culprit.index}] exited {culprit.exit_code} ({spec.phrase}); "
                         f"{_retry_phrase(job)}"))
        return _requeue(job, counted=True)
    cmds.append(Note("failed", f"{culprit.role}[{culprit.index}] exited {culprit.exit_code} ({spec.phrase})",
                     {"exitCode": culprit.exit_code}))
    return job.with_state(
        JobState.FAILED, completed_at=now, exit_code=culprit.exit_code,
        exit_reason=culprit.exit_reason or spec.reason,
    )


def _may_retry(job: Job, retry: Retry) -> bool:
    """Whether a failed job is retried: an unknown exit within the retry count (-1: without limit); with -2,
    every exit (OpenPAI's FrameworkLauncher: fancy retry policy for -1, none for -2)."""
    limit = job.spec.retry_count
    if limit == RETRY_ALWAYS:
        return True
    return retry is Retry.UNKNOWN and (limit == RETRY_UNLIMITED or job.retries < limit)


def _retry_phrase(job: Job) -> str:
    limit = job.spec.retry_count
    if limit == RETRY_ALWAYS:
        return f"job retry {job.retries + 1} (retryCount -2: retried after every exit until stopped)"
    if limit == RETRY_UNLIMITED:
        return f"job retry {job.retries + 1} (retryCount -1: no limit)"
    return f"job retry {job.retries + 1} of {limit}"


def _requeue(job: Job, *, counted: bool) -> Job:
    """Back to the queue, every task waiting again; an elastic job asks its first size again."""
    if job.spec.is_elastic:
        job = replace(job, tasks=initial_tasks(job.spec), last_resized_at=None)
    tasks = tuple(
        replace(t, state=t.state.to(TaskState.WAITING), node=None, address=None, ports={}, gpus=(),
                attempt_id=None, started_at=None, finished_at=None, exit_code=None, exit_reason=None, retries=0)
        for t in job.tasks
    )
    return job.with_state(
        JobState.WAITING, tasks=tasks, retries=job.retries + (1 if counted else 0),
        platform_retries=job.platform_retries + (0 if counted else 1), preempted_by=None
    )


P = TypeVar("P", bound=Placement)


def live_attempts(jobs: Iterable[P]) -> dict[str, tuple[P, Task]]:
    """Every attempt the master expects to exist somewhere, by attempt id."""
    return {t.attempt_id: (j, t) for j in jobs for t in j.tasks if _live(t) and t.attempt_id is not None}
