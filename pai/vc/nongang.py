"""Jobs that are not gangs (OpenPAI ``extras.gangAllocation: false``): placed task by task, as each task fits.

The rules:

* The job takes its place in its VC's queue like any job (priority, then submission). When its turn comes, each of
  its unplaced tasks is placed on its own, biggest first, best fit, as a one-task gang: the user's GPU limit, the
  VC's max, other VCs' lending limits and the per-node lending limit are checked with that task's resources. A
  task that does not fit waits; the tasks after it are still tried (a task of a kind that failed is not tried
  again in the pass: capacity only shrinks). The tasks placed make one Admission (a subset of the job's tasks);
  the rest wait with one reason, the one of the biggest task that did not fit, saying how many tasks wait.
* A job with placed tasks is also a RunningJob of the same key (its placed tasks); the pending part never preempts
  its own running part.
* Preemption: for its next task only (the biggest it could not place), as for a one-task gang, after placing what
  fits: a pass may admit some of its tasks and plan one more behind preemptions. (Not only when nothing fits: what
  a pass decides for a job must not depend on what an earlier pass placed, since an incremental pass keeps the
  reasons of jobs nothing was freed for.)
* It holds no reservation, and takes whole nodes only when it asks for them (``wholeNodes``): the cluster rule
  ``wholeNodesForMultiNodeGpu`` is for gangs.
* In a strict-FIFO VC, a job with tasks still waiting is a waiting job: the jobs behind it wait.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.domain.resources import Resources
from pai.vc.gang import Gang
from pai.vc.ledger import VcLedger
from pai.vc.order import always_borrows
from pai.vc.placement import Taken, to_admission
from pai.vc.reasons import WaitCode
from pai.vc.snapshot import PendingJob, TaskRequest, WaitingReason
from pai.vc.wording import at_max, lending_limited, user_limited

if TYPE_CHECKING:
    from pai.vc.round import Round

# What a task needs, without its name: tasks alike place alike.
TaskKind = tuple[Resources, str | None, int, tuple[tuple[str, str], ...]]
# Reasons after which a preemption may help (the others: a user limit, a lending limit, a task no node could hold).
_PREEMPTABLE = frozenset({WaitCode.NO_NODE_FITS.value, WaitCode.VC_AT_MAX.value})


def biggest_first(tasks: tuple[TaskRequest, ...]) -> list[TaskRequest]:
    """The order a gang places its tasks in (pai.vc.gang.Gang.of)."""
    return sorted(tasks, key=lambda t: (-t.resources.gpu, -t.resources.cpu, -t.resources.memory_mb, -t.ports,
                                        t.role, t.index))


def task_gang(r: Round, job: PendingJob, task: TaskRequest) -> Gang:
    return Gang.of((task,), r.cfg.whole_nodes_for_multi_node_gpu, whole_nodes=job.whole_nodes)


def consider_tasks(r: Round, job: PendingJob, vc: VcLedger) -> bool:
    """Place what fits of a non-gang job, plan a preemption for its next task, or record why its tasks wait. True
    when every task was placed."""
    placed: list[Taken] = []
    failed: dict[TaskKind, WaitingReason] = {}
    first: tuple[TaskRequest, WaitingReason] | None = None
    waiting = 0
    for task in biggest_first(job.tasks):
        kind = (task.resources, task.gpu_type, task.ports, task.node_selector)
        reason = failed.get(kind)
        if reason is None:
            got = _place_one(r, job, vc, task_gang(r, job, task))
            if isinstance(got, WaitingReason):
                reason = failed[kind] = got
            else:
                placed.extend(got)
                continue
        waiting += 1
        if first is None:
            first = (task, reason)
    if placed:
        r.admissions.append(to_admission(r.pool, job.key, placed))
        r.admitted.append((job, placed))
    if first is None:
        return True
    task, reason = first
    if reason.code in _PREEMPTABLE:
        planned = r._preempt(job, task_gang(r, job, task), vc)
        if planned is not None:
            reason = planned
    return r._wait(job, tasks_wait(reason, waiting))


def _place_one(r: Round, job: PendingJob, vc: VcLedger, gang: Gang) -> list[Taken] | WaitingReason:
    """One task, with the checks a gang gets (pai.vc.round.Round._consider) on that task's resources."""
    request = gang.request
    if not vc.user_fits(job.user, request.gpu):
        return user_limited(vc, job.user, request.gpu)
    never = r.state.never_fits(gang)
    if never is not None:
        return never
    borrowing = always_borrows(job.priority) or not vc.within_guarantee(request)
    if borrowing and not r._lending_ok(vc, request):
        return lending_limited(vc, request, r.lenders)
    if not vc.fits_max_now(request):
        return at_max(vc, request)
    taken = r._place_as(job, gang, borrowing)
    if isinstance(taken, WaitingReason):  # the per-node lending limit (pai.vc.node_lending)
        return taken
    if taken is None:
        return r._no_fit[(gang.key, job.priority)]
    vc.add(job.user, request)
    r.state.used_all = r.state.used_all + request
    return taken


def tasks_wait(reason: WaitingReason, waiting: int) -> WaitingReason:
    """The reason of the job's first waiting task, saying how many of its tasks wait (a pass that finds nothing
    freed keeps it as it is, so it depends on the tasks waiting only)."""
    what = "task waits" if waiting == 1 else "tasks wait"
    message = f"{waiting} {what} to be placed (gangAllocation: false): {reason.message}"
    return WaitingReason(reason.code, message, reason.position, {**reason.figures, "tasksWaiting": waiting})
