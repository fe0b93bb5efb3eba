"""What would unblock a waiting job: the smallest change that lets it start, computed once a pass has decided.

Each rule (``RULES``, by reason code) looks at what the pass leaves (its admissions and planned preemptions
included) and gives ``figures["unblock"]`` plus one sentence appended to the message:

- ``NoNodeFits``: the fewest running jobs, of any VC and whatever the preemption rules (non-preemptible ones
  included: what would have to end, not what may be preempted), whose exit makes the gang fit. Tasks are placed
  biggest first as placement does; where one does not fit, of the first ``EXAMINE_NODES`` nodes (most free GPUs
  first, then nodes closed by whole-node work) the one needing the fewest exits wins, then the one whose exits
  end soonest. A one-task job also gets the GPU count framing: node X has 5 of the 8 GPUs free.
- ``VcAtMax``: the VC max that would admit it, and the fewest of the VC's own jobs whose exit would.
- ``UserLimit``: the user's GPU limit in the VC that would admit it, and the fewest of the user's jobs there
  whose exit would.
- ``LendingLimit``: how far the ``lendingLimit`` of the VCs that keep idle guarantee would have to rise.
- ``HeldByNonPreemptible``: as its underlying code. Other codes get no hint: waiting for victims needs no
  change, and ``NeverFits``/``UnknownVc`` already say what to change. Non-gang jobs get none (their reason is
  one task's).

Hints change nothing: what they try on the nodes is undone, and no gang is cached for later passes.

When it ends: a running job declared or typically running ``expected_seconds`` ends at ``started_at`` plus
that, not before ``now``; one being stopped ends now; a set of jobs when its last job ends; unknown when any of
them is unknown (then no time is given). A time says where it comes from (``etaFrom``): ``typical`` when one of
the ends is a typical run time (``RunningJob.expected_typical``: the launcher's estimate for a job that declared
none), else ``declared``.

Cost: only the first ``SchedulerConfig.unblock_hints_per_vc`` waiting jobs of each VC get a hint; hints are
memoised by what they depend on (gang shape and priority; VC and request; VC, user and GPUs), and a pass runs
at most ``MAX_SEARCHES`` of them (later ones: no hint).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain, islice
from typing import Any

from pai.domain.resources import Resources
from pai.vc.gang import Gang, Need
from pai.vc.ledger import VcLedger
from pai.vc.placement import Taken, hold, release
from pai.vc.reasons import WaitCode
from pai.vc.snapshot import PendingJob, RunningJob, WaitingReason
from pai.vc.state import State
from pai.vc.victims import OnNode

EXAMINE_NODES = 16  # nodes priced per task that does not fit (and as many closed by whole-node work)
MAX_SEARCHES = 64  # hints computed per pass (memo hits are free)
SHOWN = 3  # jobs named in a sentence
DIMS = (("gpu", "GPU"), ("cpu", "CPU"), ("memoryMB", "MB memory"))
Amounts = tuple[int, int, int]
NEVER = float("inf")


@dataclass(frozen=True, slots=True)
class Hint:
    figures: dict[str, Any]
    text: str

    def on(self, reason: WaitingReason) -> WaitingReason:
        return WaitingReason(reason.code, f"{reason.message}; {self.text}", reason.position,
                             {**reason.figures, "unblock": self.figures})


def add_hints(state: State, queue: Iterable[PendingJob], waiting: dict[str, WaitingReason], *, now: float,
              claimed: set[str], started: Sequence[tuple[PendingJob, list[Taken]]] = (),
              no_fit: Collection[tuple[object, ...]] = ()) -> dict[str, WaitingReason]:
    """``waiting`` with a hint on the reasons of the first ``unblock_hints_per_vc`` jobs of each VC that a rule
    covers (reasons that carry one already, kept from an earlier pass, stay as they are). ``claimed``: victims of
    the pass's plans; ``started``: the jobs it admitted, with where (they run from now on); ``no_fit``: the
    (gang key, priority) pairs the pass found no room for (capacity only shrank since: a one-task gang among them
    is not looked for again, a search over every node with room for part of it)."""
    per_vc = state.cfg.unblock_hints_per_vc
    hinter: Hinter | None = None
    out = waiting
    for job in queue:
        reason = waiting.get(job.key)
        if reason is None or reason.position > per_vc or "unblock" in reason.figures:
            continue
        code = reason.code
        if code == WaitCode.HELD_BY_NON_PREEMPTIBLE:
            code = str(reason.figures.get("underlyingCode", ""))
        rule = RULES.get(code)
        if rule is None or job.vc not in state.vcs or not job.gang:  # a non-gang job's reason is one task's
            continue
        if reason.figures.get("scope") == "node":  # the per-node lending limit: its reason names the nodes already
            continue
        if hinter is None:
            hinter = Hinter(state, now, claimed, started, no_fit)
            out = dict(waiting)
        hint = hinter.hint(code, rule, job)
        if hint is not None:
            out[job.key] = hint.on(reason)
    return out


class Hinter:
    """The hints of one pass, memoised."""

    def __init__(self, state: State, now: float, claimed: set[str],
                 started: Sequence[tuple[PendingJob, list[Taken]]] = (),
                 no_fit: Collection[tuple[object, ...]] = ()) -> None:
        self.state = state
        self.no_fit = no_fit
        self.pool = state.pool
        self.now = now
        # victims of this pass's plans: their nodes' capacity is spoken for, their VC's share is leaving
        self.claimed = claimed
        self.searches = 0
        self._memo: dict[tuple[object, ...], Hint | None] = {}
        self.holders = {owner for owner, _ in self.pool.held.values()}
        self._by_vc: dict[str, list[RunningJob]] | None = None
        self._started = started
        self._new_on: dict[int, list[int]] | None = None  # node -> positions in ``started`` of jobs placed there
        self._made: dict[str, RunningJob] = {}  # jobs of ``started`` made running jobs so far

    def new_on(self, i: int) -> list[OnNode]:
        """The jobs this pass admitted with a task on node ``i``, and their share of it (as VictimIndex.on_node).
        Indexed by node from the placements alone; a job is made a RunningJob only when a node it is on is priced."""
        if self._new_on is None:
            self._new_on = {}
            for k, (_, taken) in enumerate(self._started):
                for t in taken:
                    self._new_on.setdefault(t.node, []).append(k)
        out: dict[str, list[int]] = {}
        for k in self._new_on.get(i, ()):
            job = self._new_job(k)
            if job is None:
                continue
            acc = out.get(job.key)
            if acc is None:
                acc = out[job.key] = [0, 0, 0, 0]
                for request, node in job.tasks:
                    if self.pool.index[node] == i:
                        acc[0] += request.resources.gpu
                        acc[1] += request.resources.cpu
                        acc[2] += request.resources.memory_mb
                        acc[3] += 1
        return [(self._made[key], g, c, m, n) for key, (g, c, m, n) in out.items()]

    def _new_job(self, k: int) -> RunningJob | None:
        """The k-th job this pass admitted, as a running job (None: a job with a running part already)."""
        job, taken = self._started[k]
        made = self._made.get(job.key)
        if made is None and job.key not in self.state.index.jobs:
            tasks = {(t.role, t.index): t for t in job.tasks}
            placed = tuple((tasks[(t.need.role, t.need.index)], self.pool.names[t.node]) for t in taken)
            made = self._made[job.key] = RunningJob(job.key, job.vc, job.user, job.priority, self.now, placed,
                                                    preemptible=job.preemptible,
                                                    expected_seconds=job.expected_seconds,
                                                    expected_typical=job.expected_typical)
        return made

    def new_jobs(self) -> list[RunningJob]:
        """The jobs this pass admitted, as running jobs (a job with a running part already is left out)."""
        return [j for k in range(len(self._started)) if (j := self._new_job(k)) is not None]

    def hint(self, code: str, rule: Rule, job: PendingJob) -> Hint | None:
        memo_of, compute = rule
        # the pass's own gang, or one made here: a gang cached now would outlive the job's tasks (non-gang jobs)
        gang = self.state.gangs.get(job.key) or Gang.of(job.tasks, self.state.cfg.whole_nodes_for_multi_node_gpu,
                                                         whole_nodes=job.whole_nodes)
        vc = self.state.vcs[job.vc]
        key = (code, *memo_of(self, job, gang))
        if key not in self._memo:
            if self.searches >= MAX_SEARCHES:
                return None
            self.searches += 1
            self._memo[key] = compute(self, job, gang, vc)
        return self._memo[key]

    # ---- when jobs end -------------------------------------------------------------------------------------

    def end(self, job: RunningJob) -> float | None:
        if self.stopping(job):
            return self.now
        if job.expected_seconds is None:
            return None
        return max(job.started_at + job.expected_seconds, self.now)

    def stopping(self, job: RunningJob) -> bool:
        return job.preempting or job.key in self.claimed

    def last_end(self, jobs: Iterable[RunningJob]) -> float:
        """When the last of ``jobs`` ends; NEVER when one of them has no known end."""
        ends = [self.end(j) for j in jobs]
        return NEVER if any(e is None for e in ends) else max((e for e in ends if e is not None), default=self.now)

    def fewest(self, cands: Sequence[tuple[RunningJob, Amounts]], short: Amounts) -> list[RunningJob] | None:
        """The fewest of ``cands`` whose amounts together cover ``short``, preferring the set that ends soonest:
        of taking the biggest first and taking the soonest ending first, the shorter set, then the sooner."""
        dims = [d for d in range(3) if short[d] > 0]

        def by_size(c: tuple[RunningJob, Amounts]) -> tuple[object, ...]:
            return (*(-c[1][d] for d in dims), self._end_key(c[0]), c[0].key)

        def by_end(c: tuple[RunningJob, Amounts]) -> tuple[object, ...]:
            return (self._end_key(c[0]), *(-c[1][d] for d in dims), c[0].key)

        best: tuple[tuple[int, float], list[RunningJob]] | None = None
        for order in (by_size, by_end):
            picked = _cover(sorted(cands, key=order), short)
            if picked is not None:
                cost = (len(picked), self.last_end(picked))
                if best is None or cost < best[0]:
                    best = (cost, picked)
        return None if best is None else best[1]

    def _end_key(self, job: RunningJob) -> float:
        end = self.end(job)
        return NEVER if end is None else end

    def jobs_of(self, vc: str) -> list[RunningJob]:
        """The running jobs of a VC (built once per pass, when a quota rule first asks)."""
        if self._by_vc is None:
            self._by_vc = {}
            for r in chain(self.state.index.jobs.values(), self.new_jobs()):
                self._by_vc.setdefault(r.vc, []).append(r)
        return self._by_vc.get(vc, [])

    def exits(self, jobs: list[RunningJob]) -> dict[str, Any]:
        """The figures of a set of exits: the jobs, soonest ending first, when the last ends (or None) and, with a
        time, where it comes from: ``typical`` when one of the ends is a typical run time, else ``declared``."""
        ordered = sorted(jobs, key=lambda j: (self._end_key(j), j.key))
        end = self.last_end(ordered)
        if end == NEVER:
            return {"jobs": [j.key for j in ordered], "eta": None}
        typical = any(j.expected_typical and not self.stopping(j) for j in ordered)
        return {"jobs": [j.key for j in ordered], "eta": end, "etaFrom": "typical" if typical else "declared"}

    def once(self, figures: dict[str, Any]) -> str:
        """``once alice~a and bob~b exit (about 14:20 UTC)``; ``(about 14:20 UTC, by typical run times)`` when
        an end is a typical run time."""
        jobs: list[str] = figures["jobs"]
        eta = figures["eta"]
        verb = "exits" if len(jobs) == 1 else "exit"
        if eta is None:
            return f"once {_names(jobs)} {verb}"
        source = ", by typical run times" if figures.get("etaFrom") == "typical" else ""
        return f"once {_names(jobs)} {verb} (about {clock(eta, self.now)}{source})"

    # ---- NoNodeFits: running jobs whose exit makes the gang fit ---------------------------------------------

    def nodes(self, job: PendingJob, gang: Gang, vc: VcLedger) -> Hint | None:
        pool = self.pool
        taken: list[Taken] = []
        gone: list[RunningJob] = []
        gone_keys: set[str] = set()
        reopened: list[int] = []
        short_node: tuple[int, int] | None = None  # (node, free GPUs) where the first task needed exits
        try:
            known = len(gang.needs) == 1 and (gang.key, job.priority) in self.no_fit and job.key not in self.holders
            for need in gang.needs:
                i = None if known else pool.best_fit(need, job.key, job.priority, exclusive=gang.exclusive)
                if i is None:
                    found = self._cheapest_node(job, gang, need, gone_keys)
                    if found is None:
                        return None
                    i, leaving = found
                    if short_node is None:
                        short_node = (i, pool.free_gpu[i])
                    for r in leaving:
                        self._exit(r, gone, gone_keys, reopened)
                    if not pool.fits(i, need, job.key, job.priority, exclusive=gang.exclusive):
                        return None
                hold(pool, need, i, gang.exclusive)
                taken.append(Taken(need, i))
        finally:
            release(pool, taken)
            for i in reopened:
                pool.close(i)
            for r in reversed(gone):
                self._back(r)
        if not gone:
            return None  # it fits on what the pass left: nothing to change
        figures = self.exits(gone)
        text = f"would start {self.once(figures)}"
        need = gang.needs[0]
        if len(gang.needs) == 1 and not gang.exclusive and short_node is not None and short_node[1] < need.gpu:
            node, have = pool.names[short_node[0]], short_node[1]
            figures = {"kind": "nodeGpus", "node": node, "have": have, "need": need.gpu, **figures}
            more = need.gpu - have
            text = f"{more} more GPU{'' if more == 1 else 's'} on {node} would do: it would start {self.once(figures)}"
        else:
            figures = {"kind": "jobsExit", **figures}
        return Hint(figures, text)

    def _cheapest_node(self, job: PendingJob, gang: Gang, need: Need,
                       gone: set[str]) -> tuple[int, list[RunningJob]] | None:
        pool = self.pool
        best: tuple[tuple[int, float, int], int, list[RunningJob]] | None = None
        nodes = chain(islice(pool.emptiest(need.gpu_type), EXAMINE_NODES),
                      islice(pool.whole_nodes(need.gpu_type), EXAMINE_NODES))
        for n, i in enumerate(nodes):
            if (pool.total_gpu[i] < need.gpu or pool.total_cpu[i] < need.cpu or pool.total_mem[i] < need.mem
                    or pool.free_ports[i] < need.ports or (need.selector and not pool.matches(i, None, need.selector))):
                continue
            held = pool.held.get(i)
            if held is not None and held[0] != job.key and job.priority <= held[1]:
                continue
            leaving = self._exits_on(i, need, gang.exclusive or not pool.open[i], gone)
            if leaving is None:
                continue
            cost = (len(leaving), self.last_end(leaving), n)
            if best is None or cost < best[0]:
                best = (cost, i, leaving)
        return None if best is None else (best[1], best[2])

    def _exits_on(self, i: int, need: Need, whole: bool, gone: set[str]) -> list[RunningJob] | None:
        """The fewest jobs on node ``i`` whose exit lets ``need`` fit there (``whole``: the node must be idle)."""
        pool = self.pool
        on = [e for e in chain(self.state.index.on_node(i), self.new_on(i)) if e[0].key not in gone]
        if whole:
            if not on or sum(e[4] for e in on) != pool.tasks_on[i] or any(e[0].key in self.claimed for e in on):
                return None  # nothing to free, or work no exit here frees (claimed by a plan)
            return [e[0] for e in on]
        short = (need.gpu - pool.free_gpu[i], need.cpu - pool.free_cpu[i], need.mem - pool.free_mem[i])
        if max(short) <= 0:
            return None  # not short of capacity here (a hold or a label keeps it out)
        return self.fewest([(e[0], (e[1], e[2], e[3])) for e in on if e[0].key not in self.claimed], short)

    def _exit(self, job: RunningJob, gone: list[RunningJob], keys: set[str], reopened: list[int]) -> None:
        pool = self.pool
        gone.append(job)
        keys.add(job.key)
        for task, node in job.tasks:
            i = pool.index.get(node)
            if i is None:
                continue
            r = task.resources
            pool.give(i, r.gpu, r.cpu, r.memory_mb, task.ports)
            if not pool.open[i] and pool.tasks_on[i] == 0 and i not in reopened:
                pool.reopen(i)
                if pool.open[i]:
                    reopened.append(i)

    def _back(self, job: RunningJob) -> None:
        pool = self.pool
        for task, node in job.tasks:
            i = pool.index.get(node)
            if i is not None:
                r = task.resources
                pool.take(i, r.gpu, r.cpu, r.memory_mb, task.ports)

    # ---- quota rules -----------------------------------------------------------------------------------------

    def vc_max(self, job: PendingJob, gang: Gang, vc: VcLedger) -> Hint | None:
        used, need, cap = _amounts(vc.used), _amounts(gang.request), _amounts(vc.max)
        changes = [{"field": f"max.{name}", "now": cap[d], "needed": used[d] + need[d]}
                   for d, (name, _) in enumerate(DIMS) if used[d] + need[d] > cap[d]]
        if not changes:
            return None
        short = (max(used[0] + need[0] - cap[0], 0), max(used[1] + need[1] - cap[1], 0),
                 max(used[2] + need[2] - cap[2], 0))
        cands = [(r, _amounts(r.request)) for r in self.jobs_of(vc.name)]
        leaving = self.fewest(cands, short) or []
        figures = {"kind": "vcLimit", "vc": vc.name, "changes": changes, **self.exits(leaving)}
        text = f"would fit if VC `{vc.name}`'s max {_were(changes)}"
        return Hint(figures, text + (f", or {self.once(figures)}" if leaving else ""))

    def user_limit(self, job: PendingJob, gang: Gang, vc: VcLedger) -> Hint | None:
        limit = vc.quota.gpu_limit_for(job.user)
        have = vc.user_gpu.get(job.user, 0)
        needed = have + gang.request.gpu
        if limit is None or needed <= limit:
            return None
        field = (f"userLimits.users.{job.user}" if job.user in vc.quota.user_gpu_limits else "userLimits.gpu")
        cands = [(r, (r.request.gpu, 0, 0)) for r in self.jobs_of(vc.name) if r.user == job.user]
        leaving = self.fewest(cands, (needed - limit, 0, 0)) or []
        figures = {"kind": "userLimit", "vc": vc.name, "user": job.user, "field": field, "now": limit,
                   "needed": needed, **self.exits(leaving)}
        text = f"would fit if user {job.user}'s GPU limit in VC `{vc.name}` were {needed} instead of {limit}"
        return Hint(figures, text + (f", or {self.once(figures)}" if leaving else ""))

    def lending(self, job: PendingJob, gang: Gang, vc: VcLedger) -> Hint | None:
        free = self.state.total - self.state.used_all - gang.request
        if free.is_negative():
            return None  # the cluster is full: no lending would make room
        room = _amounts(free)
        keepers = [(v, _amounts(v.held_back()), _amounts(v.quota.lending_limit or Resources()))
                   for v in self.state.lenders if v is not vc]
        changes: list[dict[str, Any]] = []
        for d, (name, _) in enumerate(DIMS):
            short = sum(k[1][d] for k in keepers) - room[d]
            for keeper, held, limit in sorted(keepers, key=lambda k: (-k[1][d], k[0].name)):
                if short <= 0:
                    break
                more = min(short, held[d])
                if more > 0:
                    changes.append({"vc": keeper.name, "field": f"lendingLimit.{name}", "now": limit[d],
                                    "needed": limit[d] + more})
                    short -= more
        if not changes:
            return None
        words = " and ".join(f"VC `{c['vc']}`'s lendingLimit {_label(c['field'])} were {c['needed']} instead of "
                             f"{c['now']}" for c in changes)
        return Hint({"kind": "lendingLimit", "changes": changes}, f"would fit if {words}")


Rule = tuple[Callable[[Hinter, PendingJob, Gang], tuple[object, ...]],
             Callable[[Hinter, PendingJob, Gang, VcLedger], Hint | None]]

RULES: dict[str, Rule] = {
    # what each hint depends on besides the pass's state, and how it is found
    WaitCode.NO_NODE_FITS.value: (
        lambda h, job, gang: (gang.key, job.priority, job.key if job.key in h.holders else ""), Hinter.nodes),
    WaitCode.VC_AT_MAX.value: (lambda h, job, gang: (job.vc, gang.request), Hinter.vc_max),
    WaitCode.USER_LIMIT.value: (lambda h, job, gang: (job.vc, job.user, gang.request.gpu), Hinter.user_limit),
    WaitCode.LENDING_LIMIT.value: (lambda h, job, gang: (job.vc, gang.request), Hinter.lending),
}


def _cover(ordered: Iterable[tuple[RunningJob, Amounts]], short: Amounts) -> list[RunningJob] | None:
    """Jobs taken in order, skipping those that free nothing still short, until ``short`` is covered."""
    left = list(short)
    picked: list[RunningJob] = []
    for job, amounts in ordered:
        if all(left[d] <= 0 or amounts[d] <= 0 for d in range(3)):
            continue
        picked.append(job)
        for d in range(3):
            left[d] -= amounts[d]
        if max(left) <= 0:
            return picked
    return None


def _names(jobs: list[str]) -> str:
    if len(jobs) == 1:
        return jobs[0]
    if len(jobs) <= SHOWN:
        return f"{', '.join(jobs[:-1])} and {jobs[-1]}"
    return f"{', '.join(jobs[:SHOWN])} and {len(jobs) - SHOWN} more"


def _amounts(r: Resources) -> Amounts:
    return (r.gpu, r.cpu, r.memory_mb)


def _label(field: str) -> str:
    name = field.rsplit(".", 1)[-1]
    return next(label for n, label in DIMS if n == name)


def _were(changes: list[dict[str, Any]]) -> str:
    """``GPU were 24 instead of 16 and CPU were 96 instead of 64``."""
    return " and ".join(f"{_label(c['field'])} were {c['needed']} instead of {c['now']}" for c in changes)


def clock(at: float, now: float) -> str:
    """A time as a person reads it: ``14:20 UTC`` within a day of ``now``, else with the date."""
    t = datetime.fromtimestamp(at, UTC)
    return t.strftime("%H:%M UTC" if abs(at - now) < 86_400 else "%Y-%m-%d %H:%M UTC")
