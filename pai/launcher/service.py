"""The launcher's synchronous core: each method is one transaction on the store.

The master runs every method on one store thread (see ``loop.py``); the logic itself lives in pure
functions (``lifecycle``, ``reconcile``, ``binding``, ``snapshot``, ``pai.vc.schedule``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from pai.domain import pathvars
from pai.domain.errors import ForbiddenUserError, InvalidParametersError, NoNodeError, NoVirtualClusterError
from pai.domain.job import Job, Task, initial_tasks
from pai.domain.jobspec import JobSpec, SpecWarning
from pai.domain.limits import JobLimits
from pai.domain.localpaths import master_paths
from pai.domain.neverfits import never_fits
from pai.domain.node import Node, NodeState
from pai.domain.resources import Resources
from pai.domain.storage import Storage
from pai.domain.timing import FULL_PASS_SECONDS, GRACE_SECONDS
from pai.launcher import cluster, localpaths, logs, sshaccess, storages
from pai.launcher.access import require_owner_or_admin
from pai.launcher.accounts import Accounts
from pai.launcher.binding import BindingError, NodeLedger, bind_task, ledgers
from pai.launcher.directory import Directory
from pai.launcher.env import task_env
from pai.launcher.experiments import ExperimentRunner
from pai.launcher.heartbeats import Heartbeats, Quiet, quiet_attempts
from pai.launcher.inbox import Inbox
from pai.launcher.lifecycle import (
    Admitted,
    AttemptEnded,
    AttemptRunning,
    AttemptStarted,
    Bound,
    Command,
    Event,
    Exited,
    Note,
    Preempted,
    Resized,
    StopRequested,
    live_attempts,
    on_event,
)
from pai.launcher.logs import LogLocation
from pai.launcher.members import members_of
from pai.launcher.metrics import LauncherMetrics
from pai.launcher.reconcile import NodeJobs, Placed, pending_starts, reconcile
from pai.launcher.scheduling import Scheduling
from pai.launcher.snapshot import (
    build_snapshot,
    drain_message,
    draining_victims,
    hold_back,
    usage_by_node,
)
from pai.launcher.usage import SAMPLE_SECONDS, NodeReport, UsageSampler, node_reports
from pai.protocol.exitcodes import PlatformExit
from pai.protocol.members import JobMembers
from pai.protocol.messages import (
    AgentRequest,
    ContainerReport,
    HeartbeatRequest,
    MasterReply,
    RegisterRequest,
    RegistryCredentials,
    StartTask,
    StopTask,
    VolumeMount,
)
from pai.store import history, leases, sealing, stats, wakeups
from pai.store import jobs as store_jobs
from pai.store import nodes as store_nodes
from pai.store import users as store_users
from pai.store.db import Database
from pai.store.records import TaskAttempt, User
from pai.store.wakeups import Wakeup
from pai.vc import Decision
from pai.vc.snapshot import Resize

log = logging.getLogger("pai.launcher")


FENCE_SLACK_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Submitted:
    job: Job
    # the submission's warnings, as its history has them: the spec's (fields not honoured here), then what no node
    # of the cluster could ever hold (pai.domain.neverfits)
    warnings: tuple[SpecWarning, ...]


@dataclass(frozen=True, slots=True)
class StopResult:
    job: Job
    already_ended: bool  # the job was SUCCEEDED, FAILED or STOPPED before the request: nothing changed


@dataclass(frozen=True, slots=True)
class LauncherConfig:
    grace_seconds: float = GRACE_SECONDS
    heartbeat_seconds: float = 1.0
    node_timeout_seconds: float = 30.0
    fence_grace_seconds: float = 5.0  # how long a fenced task gets between SIGTERM and SIGKILL
    port_range: tuple[int, int] = (20000, 40000)
    full_pass_seconds: float = FULL_PASS_SECONDS  # the scheduler's safety net: a pass rebuilt from the store
    # The most admissions one pass acts on (binds, stores, tells the agents): a pass that decides more (the first
    # after a thousand nodes joined a full queue) leaves the rest to the next pass, soon, so that no transaction
    # holds the writer thread for seconds while agents wait.
    admissions_per_pass: int = 1000
    usage_sample_seconds: float = SAMPLE_SECONDS  # how often every VC's usage is sampled (the dashboard's chart)

    @property
    def fence_window_seconds(self) -> float:
        """How long after a node is LOST its tasks are requeued: by then its agent (or, if the agent died,
        the node's fence watchdog) has stopped them. The grace, plus slack for the watchdog's poll and a
        heartbeat in flight."""
        return self.fence_grace_seconds + FENCE_SLACK_SECONDS + 2 * self.heartbeat_seconds


def _capacity(node: Node) -> tuple[object, ...]:
    """What the scheduler's view of a node is made of (a change means a full pass)."""
    return (node.address, node.total, node.gpu_type, node.labels, node.state, node.schedulable(), node.failed_gpus,
            node.port_range)


def _new_id() -> str:
    return uuid.uuid4().hex


class Launcher:
    def __init__(
        self,
        db: Database,
        config: LauncherConfig | None = None,
        clock: Callable[[], float] = time.time,
        ids: Callable[[], str] = _new_id,
        protected_paths: Sequence[str] = (),
    ) -> None:
        self.db = db
        self.protected_paths = tuple(protected_paths)  # no job's local path may overlap them (its data dir)
        self.config = config or LauncherConfig()
        self.clock = clock
        self.ids = ids
        # A node is judged by its silence since the later of its last heartbeat and this master's start,
        # so that a master that was down longer than the timeout does not declare every node lost.
        self.started_at = clock()
        self._requeued: set[str] = set()  # LOST nodes whose attempts have been ended (until they come back)
        self._touched: set[str] = set()  # nodes whose tasks changed since take_touched (their agents are poked)
        self.accounts = Accounts(db, clock)
        self.clusters = cluster.ClusterCache()
        self.directory = Directory(db, clock, self.accounts, self.clusters)
        self.scheduling = Scheduling(self.config.full_pass_seconds)
        self.heartbeats = Heartbeats()
        # Whether each job seen is elastic (its spec's, which never changes): a heartbeat loads whole the elastic
        # jobs on its node (their members go with its reply) and those not known yet. Kept to the active jobs at
        # each full pass that reads them all.
        self._elastic: dict[str, bool] = {}
        self.inbox = Inbox()  # what other processes' writes changed (``heard``), for the next pass
        self.usage = UsageSampler(db, clock, self.clusters, lambda: self.scheduling.jobs.values())
        self.metrics = LauncherMetrics()
        # The fencing token (ADR 0001) on every reply to an agent and every poke: the term of the lease this
        # launcher holds; 0 while it holds none (unfenced: agents accept it until they have seen a higher one).
        self.epoch = 0
        self.fencing = False  # lead(fence=True): the writes that matter check the lease first (leases.fenced)
        self.experiments = ExperimentRunner(db, self.submit, self.stop_for, self.accounts.user, clock)

    # ---- users' requests ----------------------------------------------------------------------

    def submit(self, owner: User, spec: JobSpec, config_text: str, warnings: Sequence[SpecWarning] = ()) -> Job:
        """A job for ``owner`` (the caller, as the request resolved them): its VC must be one their groups grant.
        ``warnings`` (what the spec asks for and this cluster does not honour) go to its history, with what no node
        could ever hold (``accept``)."""
        return self.accept(owner, spec, config_text, warnings).job

    def accept(self, owner: User, spec: JobSpec, config_text: str,
               warnings: Sequence[SpecWarning] = ()) -> Submitted:
        """``submit``, with every warning the job's history has."""
        now = self.clock()
        user = owner.name
        job = Job(id=_new_id(), user=user, spec=spec, submitted_at=now, tasks=initial_tasks(spec))
        with self.db.session() as s:
            job = replace(job, spec=self.admit(s, owner, spec))
            job = replace(job, spec=sshaccess.with_key_pair(job.spec, job.key))  # the ssh plugin's, sealed
            warnings = (*warnings, *self.foreseen(s, job.spec))
            store_jobs.insert_job(s, job, config_text)
            self.scheduling.changed(job.id)
            wakeups.job_changed(s, job.id)  # the leader's launcher, in whichever process it is, hears it at commit
            history.add_event(s, job.id, now, "submitted", f"submitted by {user} to VC {spec.virtual_cluster}", {})
            for warning in warnings:
                history.add_event(s, job.id, now, "warning", f"{warning.field}: {warning.message}", warning.to_dict())
        log.info("job submitted job=%s vc=%s tasks=%d", job.key, job.vc, len(job.tasks))
        return Submitted(job, tuple(warnings))

    def admit(self, s: Session, owner: User, spec: JobSpec) -> JobSpec:
        """``spec`` as ``owner`` may submit it now (``submit``'s checks, and a dry run's): its VC one their groups
        grant and open, non-preemption a right they have, its paths bound (v1's ``$PAI_USER_NAME``, ...), its
        storages resolved against those there are now and its local paths allowed."""
        clu = self.require_vc(s, owner, spec.virtual_cluster)
        if not spec.preemptible:  # extras.preemptible: false is a right the configuration grants
            clu.config.non_preemptible.require(owner.name, owner.groups, spec.priority_class, admin=owner.admin)
        spec = pathvars.bind(spec, owner.name, cluster.default_fs(s))
        if spec.storages:
            spec = storages.resolve(s, spec, owner)
        localpaths.require_allowed(spec, localpaths.roots_for(clu.local_paths, owner),
                                   master_paths(self.protected_paths))
        return spec

    def foreseen(self, s: Session, spec: JobSpec) -> tuple[SpecWarning, ...]:
        """What no node of the cluster as it stands could ever hold of ``spec`` (warnings: the job is accepted)."""
        return tuple(never_fits(spec, store_nodes.capacities(s)))

    def require_vc(self, s: Session, owner: User, vc: str) -> cluster.Cluster:
        """The cluster, once ``vc`` is known to exist, to be one of ``owner``'s and to accept jobs (else the error that
        names ``virtualCluster``)."""
        clu = self.clusters.get(s)
        status = clu.vc_status(vc)
        if status is None:
            raise NoVirtualClusterError(f"virtualCluster: {vc!r} does not exist", field="virtualCluster")
        if not owner.may_use_vc(vc):
            raise ForbiddenUserError(f"virtualCluster: user {owner.name} is not allowed to do operation in {vc} (it is "
                                     f"not a VC of their groups)", field="virtualCluster")
        if not status.accepts_jobs():
            raise InvalidParametersError(f"virtualCluster: VC {vc!r} is {status.value} and accepts no new jobs",
                                         field="virtualCluster")
        return clu

    def stop_for(self, job_ids: Collection[str], by: str) -> list[Job]:
        """Stop jobs on the platform's behalf (``by`` says who: an experiment's searcher), not a user's request: those
        of ``job_ids`` that exist and have not ended, read and written together (ASHA's rung stops dozens at once);
        the jobs stopped."""
        stopped: list[Job] = []
        with self.db.session() as s:
            for job in store_jobs.get_jobs_by_id(s, job_ids):
                if not job.state.is_terminal():
                    stopped.append(self._apply(s, job, StopRequested(self.clock(), by)))
            store_jobs.save_jobs(s, stopped)
            for job in stopped:
                wakeups.job_changed(s, job.id)
        for job in stopped:
            log.info("job stop requested job=%s by=%s state=%s", job.key, by, job.state.value)
        return stopped

    def stop(self, key: str, by: User) -> StopResult:
        """Stop a job for ``by`` (its owner or an admin). A job that has already ended is left as it is."""
        with self.db.session() as s:
            job = store_jobs.get_job(s, key)
            require_owner_or_admin(by, job.user, "stop")
            if job.state.is_terminal():
                return StopResult(job, already_ended=True)
            job = self._apply(s, job, StopRequested(self.clock(), by.name))
            store_jobs.save_job(s, job)
            wakeups.job_changed(s, job.id)
        log.info("job stop requested job=%s by=%s state=%s", key, by.name, job.state.value)
        return StopResult(job, already_ended=False)

    def set_node_state(self, name: str, state: NodeState) -> None:
        """An admin's cordon, drain or uncordon (READY); a LOST node cannot be changed."""
        with self.db.session() as s:
            node = store_nodes.get_node(s, name)
            if node.state is NodeState.LOST:
                raise InvalidParametersError(f"node {name} is LOST; it becomes READY when its agent reports",
                                             field="value")
            store_nodes.set_node_state(s, name, state)
            self.scheduling.invalidate()
            self.heartbeats.forget([name])
            wakeups.node_changed(s, name)

    def submission_rules(self) -> tuple[dict[str, int], JobLimits]:
        """The cluster's priority classes (OpenPAI's and the admin's) and job-size limits, to parse a spec (as the
        database has them now: ``ClusterCache.get``)."""
        with self.db.session() as s:
            config = self.clusters.get(s).config
            return dict(config.priority_classes), config.limits

    def jobs_readable_by_all(self) -> bool:
        """The configuration's ``access.jobsReadableByAll`` as the database has it now (a read: on a reader thread)."""
        with self.db.session() as s:
            return self.clusters.get(s).jobs_readable_by_all

    def storages(self, user: User) -> list[Storage]:
        """The storages ``user`` may mount."""
        with self.db.session() as s:
            return storages.usable_by(s, user)

    def storage(self, name: str, user: User) -> Storage:
        with self.db.session() as s:
            return storages.get(s, name, user)

    def locate_log(self, key: str, role: str, index: int, attempt_id: str | None = None) -> LogLocation:
        """Where the output of an attempt of task ``role[index]`` is (the latest, or ``attempt_id``)."""
        with self.db.session() as s:
            return logs.locate(s, key, role, index, attempt_id)

    def set_priority(self, key: str, priority_class: str, by: User) -> Job:
        """Change a job's priority class while it waits or runs (takes effect on the next pass)."""
        with self.db.session() as s:
            job = store_jobs.get_job(s, key)
            require_owner_or_admin(by, job.user, "change the priority of")
            if job.state.is_terminal():
                raise InvalidParametersError(f"job {key} is {job.state.value}; its priority no longer matters",
                                             field="value")
            config = self.clusters.get(s).config
            value = config.priority(priority_class)
            if not job.spec.preemptible:  # the right to stay non-preemptible may come with the class
                config.non_preemptible.require(by.name, by.groups, priority_class, admin=by.admin)
            job = replace(job, spec=replace(job.spec, priority_class=priority_class, priority=value))
            store_jobs.save_job(s, job)
            self.scheduling.changed(job.id)
            wakeups.job_changed(s, job.id)
            history.add_event(s, job.id, self.clock(), "priority-changed",
                              f"priority set to {priority_class} ({value}) by {by.name}",
                              {"priorityClass": priority_class, "priority": value, "by": by.name})
        return job

    # ---- agents -------------------------------------------------------------------------------

    def lead(self, epoch: int, *, fence: bool = False) -> None:
        """Act for the term ``epoch`` from now on (the Elector's ``on_elected``): every command carries it.
        Terms only grow: an older one is a bug of the caller (ValueError). With ``fence``, the scheduling pass,
        the agents' messages and the node timeout check the lease in their transaction (``leases.fenced``) and
        raise FencedError once another master leads. What this launcher knew of the store is forgotten: another
        leader may have changed it meanwhile, and the nodes are given the node timeout from now."""
        if epoch < self.epoch:
            raise ValueError(f"epoch: {epoch} is lower than the epoch this launcher acts for ({self.epoch})")
        self.epoch, self.fencing = epoch, fence and epoch > 0
        self.started_at = self.clock()
        self.scheduling.invalidate(reload=True)
        self.heartbeats.forget_all()
        self.clusters.invalidate()
        self._requeued.clear()
        log.info("launcher acts for epoch=%d", epoch)

    def heard(self, wakeup: Wakeup | None) -> None:
        """A write made through another process (``pai.store.wakeups``), or None when some may have been missed (the
        listener reconnected). Safe from any thread: queued, and applied by the next pass on the writer thread
        (``pai.launcher.inbox``); the caller wakes the loop."""
        self.inbox.put(wakeup)

    def _take_heard(self) -> frozenset[str]:
        """First in a pass, on the writer thread: what was heard, applied (a job: looked at again; a node: a full
        pass, its quiet view forgotten; the configuration: read again; missed: everything read again). Returns the
        ids of the jobs heard of."""
        heard = self.inbox.take()
        if heard.reset:
            self.scheduling.invalidate(reload=True)
            self.heartbeats.forget_all()
        if heard.reset or heard.cluster:
            self.clusters.invalidate()  # (the pass compares the configuration: a change makes it a full one)
        if heard.nodes:
            self.scheduling.invalidate()
            self.heartbeats.forget(heard.nodes)
        for job_id in heard.jobs:
            self.scheduling.changed(job_id)
        if heard:
            log.debug("heard jobs=%d nodes=%s cluster=%s reset=%s", len(heard.jobs), ",".join(sorted(heard.nodes)),
                      heard.cluster, heard.reset)
        return heard.jobs

    def _reach(self, heard: frozenset[str], jobs: Iterable[Job]) -> None:
        """The nodes of the jobs heard of (a stop made through another process): their quiet view is forgotten and
        their agents poked, so that the stop reaches them now rather than at the next full pass."""
        nodes = {t.node for j in jobs if j.id in heard for t in j.tasks if t.node}
        if nodes:
            self.heartbeats.forget(nodes)
            self._touched.update(nodes)

    def _fence(self, s: Session) -> None:
        """First in a transaction that acts for the lease's term: FencedError once another master leads."""
        if self.fencing:
            leases.fenced(s, leases.LAUNCHER, self.epoch)

    def register(self, req: RegisterRequest) -> MasterReply:
        (reply,) = self.agent_batch([req])
        assert not isinstance(reply, NoNodeError)  # a registration makes its node
        return reply

    def quiet_heartbeat(self, req: HeartbeatRequest) -> MasterReply | None:
        """The reply to a heartbeat that reports what the master expects on its node, from memory, without a
        transaction (see ``heartbeats``); None when the heartbeat needs the store (``heartbeat``)."""
        return self._reply() if self.heartbeats.answer(req, self.clock()) else None

    def heartbeat(self, req: HeartbeatRequest) -> MasterReply:
        quiet = self.quiet_heartbeat(req)
        if quiet is not None:
            return quiet
        (reply,) = self.agent_batch([req])
        if isinstance(reply, NoNodeError):
            raise reply
        return reply

    def agent_batch(self, reqs: Sequence[AgentRequest]) -> list[MasterReply | NoNodeError]:
        """Registrations and heartbeats handled in one transaction, in order (those that reached the writer thread
        while it was busy: during a pass, say, or when a thousand agents start at once): one read of their nodes
        and of the active jobs' task rows on them (``_sync_node`` loads whole only the jobs it needs), one write per
        changed job, one commit. Each gets its reply, or NoNodeError for a heartbeat of a node that never
        registered."""
        replies: list[MasterReply | NoNodeError | None] = [  # quiet by now (their time: kept on arrival)
            self._reply() if isinstance(req, HeartbeatRequest) and self.heartbeats.quiet(req) else None
            for req in reqs]
        if all(r is not None for r in replies):
            return [r for r in replies if r is not None]
        now = self.clock()
        learnt: dict[str, tuple[Quiet, tuple[int, int]]] = {}
        with self.db.session() as s:
            self._fence(s)
            names = {req.node_name for req, reply in zip(reqs, replies, strict=True) if reply is None}
            nodes = {n.name: n for n in store_nodes.get_nodes(s, names)}
            on_nodes = NodeJobs.of(store_jobs.tasks_on(s, names))  # what is on them, not the cluster
            beats: dict[str, float] = {}
            for i, req in enumerate(reqs):
                name = req.node_name
                if replies[i] is not None:
                    continue
                if isinstance(req, RegisterRequest):
                    nodes[name] = self._register(s, req, nodes.get(name), now)
                elif (node := nodes.get(name)) is None:
                    replies[i] = NoNodeError(f"node {name!r} is not registered; register first")
                    continue
                else:
                    nodes[name] = self._note_health(s, node, req, now, beats)
                replies[i], quiet = self._sync_node(s, name, req.containers, now, on_nodes)
                if quiet is not None and isinstance(req, HeartbeatRequest):
                    learnt[name] = Quiet(req.failed_gpus, req.problems, quiet), self.heartbeats.token(name)
            for job_id in on_nodes.changed:
                store_jobs.save_job(s, on_nodes.by_id[job_id])
            store_nodes.touch_heartbeats(s, beats)
        for name, (quiet_view, token) in learnt.items():  # committed: until something there changes, its
            self.heartbeats.learn(name, quiet_view, token)  # heartbeats need no transaction
        return [r for r in replies if r is not None]

    def _register(self, s: Session, req: RegisterRequest, old: Node | None, now: float) -> Node:
        """Store a node as its agent describes it; what the master decided of it (admin state, LOST) stays."""
        info = req.node
        node = Node(
            name=info.name,
            address=info.address,
            total=info.resources,
            gpu_type=info.gpu_type,
            gpu_memory_mb=info.gpu_memory_mb,
            labels=dict(info.labels),
            state=NodeState.READY if old is None else old.back_from_lost() if old.state is NodeState.LOST
            else old.state,
            admin_state=None if old is None else old.admin_state,
            last_heartbeat=now,
            port_range=old.port_range if old is not None else self.config.port_range,
            failed_gpus=req.failed_gpus,
            log_port=info.log_port,
            problems=req.problems,
        )
        store_nodes.upsert_node(s, node, node.log_port)
        if old is None or _capacity(old) != _capacity(node):
            self.scheduling.invalidate()
        log.info("agent registered node=%s address=%s resources=%s", node.name, node.address, node.total.describe())
        self.heartbeats.forget([node.name])
        return node

    def _note_health(self, s: Session, node: Node, req: HeartbeatRequest, now: float,
                     beats: dict[str, float]) -> Node:
        """Store what a heartbeat says of its node: GPU health, problems, back from LOST (else only its time, in
        ``beats``)."""
        failed = req.failed_gpus
        state = node.back_from_lost() if node.state is NodeState.LOST else node.state
        if failed == node.failed_gpus and state is node.state and req.problems == node.problems:
            beats[node.name] = now
            return node
        if req.problems != node.problems:
            log.warning("node health node=%s problems=%s", node.name, "; ".join(req.problems) or "none")
        changed = replace(node, failed_gpus=failed, state=state, last_heartbeat=now, problems=req.problems)
        store_nodes.upsert_node(s, changed, node.log_port)
        if _capacity(changed) != _capacity(node):
            self.scheduling.invalidate()
        return changed

    def _sync_node(self, s: Session, node: str, reports: tuple[ContainerReport, ...], now: float,
                   on_nodes: NodeJobs) -> tuple[MasterReply, frozenset[str] | None]:
        """Reconcile ``node`` with its agent's report: the reply, and the attempts of a node that needed nothing
        (``heartbeats.quiet_attempts``), else None. The jobs it changes are left in ``on_nodes`` for the caller to
        save. Only the jobs the heartbeat changes, starts a task of or tells the members of are loaded whole
        (``_load``): the others are read as the rows of their tasks there (``Placed``), so that a heartbeat costs
        what it changes, not what its node holds."""
        reported = {r.attempt_id for r in reports}
        expected = self._expected(node, on_nodes)
        plan = reconcile(reports, expected, now, self.config.grace_seconds)
        self._load(s, on_nodes, {job_id for job_id, _ in plan.events}
                   | {j.id for j, _ in pending_starts(node, on_nodes.jobs_on(node), reported)}
                   | {i for i in on_nodes.on.get(node, ()) if self._elastic.get(i, True)})
        if plan.events:  # again, with those jobs' tasks in their roles' order: the events in the order they had
            expected = self._expected(node, on_nodes)
            plan = reconcile(reports, expected, now, self.config.grace_seconds)
        for job_id, ev in plan.events:
            on_nodes.update(self._apply(s, on_nodes.by_id[job_id], ev))
        pending = pending_starts(node, on_nodes.jobs_on(node), reported)
        self._load(s, on_nodes, {j.id for j, _ in pending})  # (loaded already: a start was pending or an event made it)
        keys: dict[str, tuple[str, ...]] = {}  # each user's SSH keys, read once for the starts of this message
        starts = [self._start_command(s, on_nodes.by_id[j.id], t, keys) for j, t in pending]
        commands: list[StartTask | StopTask] = [*plan.stops, *starts]
        states = {a: t.state for a, (_, t) in expected.items()}
        members = tuple(m for j in on_nodes.jobs_on(node) if isinstance(j, Job) and (m := members_of(j)) is not None)
        return (self._reply(tuple(commands), members),
                quiet_attempts(reports, states, bool(plan.events or commands)))

    @staticmethod
    def _expected(node: str, on_nodes: NodeJobs) -> dict[str, tuple[Job | Placed, Task]]:
        """The live attempts placed on ``node``, by attempt id."""
        return {a: jt for a, jt in live_attempts(on_nodes.jobs_on(node)).items() if jt[1].node == node}

    def _load(self, s: Session, on_nodes: NodeJobs, ids: set[str]) -> None:
        """Load whole, in one query, the jobs of ``ids`` not loaded yet; whether each is elastic is kept."""
        missing = on_nodes.unloaded(ids)
        if missing:
            jobs = store_jobs.get_jobs_by_id(s, missing)
            on_nodes.load(missing, jobs)
            self._elastic.update((j.id, j.spec.is_elastic) for j in jobs)
            self.metrics.heartbeat_jobs_loaded.inc(len(jobs))

    def _reply(self, commands: tuple[StartTask | StopTask, ...] = (),
               members: tuple[JobMembers, ...] = ()) -> MasterReply:
        c = self.config
        return MasterReply(commands, c.heartbeat_seconds, c.node_timeout_seconds, c.fence_grace_seconds, self.epoch,
                           members)

    def _start_command(self, s: Session, job: Job, task: Task, keys: dict[str, tuple[str, ...]]) -> StartTask:
        """What the agent starts ``task`` with. ``keys``: the owners' SSH keys read so far in this transaction (an
        experiment's trials, one owner's, start by the dozen in one heartbeat's reply)."""
        if job.user not in keys:
            keys[job.user] = sshaccess.extension_keys(store_users.extension_of(s, job.user))
        spec = sealing.unsealed(s, job.spec)  # its secrets, and what was rendered from them, in clear for the agent
        role = spec.role(task.role)
        assert task.attempt_id is not None
        local_roots = self._local_roots(s, job)
        return StartTask(
            attempt_id=task.attempt_id,
            job_key=job.key,
            role=task.role,
            index=task.index,
            image=role.image or job.spec.image,
            command=role.command,
            env=task_env(job, task, trial_token=spec.trial_token),
            resources=role.resources,
            shm_mb=role.shm_mb,
            gpus=task.gpus,
            ports=dict(task.ports),
            code_dir=job.spec.code_dir,
            webhdfs=cluster.webhdfs_for(s, job.spec.code_dir),
            local_roots=local_roots or (),
            protected_paths=self.protected_paths if local_roots is not None else (),
            mounts=tuple(VolumeMount(m.host_path, m.mount_path, m.read_only, m.name) for m in job.spec.storages),
            registry_auth=None if role.image_auth is None else RegistryCredentials(
                role.image_auth.username, role.image_auth.password, role.image_auth.registry),
            secrets=spec.secrets,
            ssh=sshaccess.access_for(job, task, spec, keys[job.user]),
            members=members_of(job),
        )

    def _local_roots(self, s: Session, job: Job) -> tuple[str, ...] | None:
        """The roots a local codeDir may be under as the configuration and the user's groups stand now; None
        when the codeDir is not local."""
        if not localpaths.is_local(job.spec.code_dir):
            return None
        return localpaths.roots_for(self.clusters.get(s).local_paths, store_users.get_user(s, job.user))

    # ---- the loop's work ------------------------------------------------------------------------

    def check_nodes(self) -> list[str]:
        """Mark nodes silent for the node timeout LOST (they get nothing new), and once the fencing window has
        passed too, end their attempts (NODE_LOST, transient: requeued without using a retry). By then the
        node's agent has stopped them itself, so a task never runs in two places. Returns the nodes that
        became LOST."""
        now = self.clock()
        timeout, window = self.config.node_timeout_seconds, self.config.fence_window_seconds
        lost: list[str] = []
        fenced: dict[str, float] = {}
        beats = self.heartbeats.take_beats()
        with self.db.session() as s:
            self._fence(s)
            store_nodes.touch_heartbeats(s, beats)  # the heartbeats answered from memory since the last check
            for node in store_nodes.list_nodes(s):
                silent = now - max(node.last_heartbeat, self.started_at)
                if node.state is not NodeState.LOST:
                    self._requeued.discard(node.name)
                    if silent <= timeout:
                        continue
                    store_nodes.set_node_state(s, node.name, NodeState.LOST)
                    self.scheduling.invalidate()
                    self.heartbeats.forget([node.name])
                    lost.append(node.name)
                    log.warning("node lost node=%s silent_for=%.1fs requeue_in=%.1fs", node.name, silent,
                                timeout + window - silent)
                if silent > timeout + window and node.name not in self._requeued:
                    fenced[node.name] = silent
            if fenced:
                self._requeue_fenced(s, fenced, now)
        return lost

    def _requeue_fenced(self, s: Session, fenced: dict[str, float], now: float) -> None:
        for job in store_jobs.active_jobs_on(s, fenced):
            new = job
            for t in job.tasks:
                if t.node in fenced and t.holds_node() and t.attempt_id:
                    reason = (f"node {t.node} lost: no heartbeat for {fenced[t.node]:.0f}s; requeued once the "
                              f"fencing window had passed (node timeout {self.config.node_timeout_seconds:g}s + "
                              f"{self.config.fence_window_seconds:g}s), by which its agent had stopped the task")
                    new = self._apply(s, new, Exited(now, t.attempt_id, int(PlatformExit.NODE_LOST), reason))
            if new is not job:
                store_jobs.save_job(s, new)
                nodes = sorted({t.node for t in job.tasks if t.node in fenced})
                log.warning("tasks of a lost node requeued job=%s nodes=%s", job.key, ",".join(nodes))
        self._requeued.update(fenced)

    def schedule_pass(self, *, full: bool = False) -> Decision:
        """One scheduling pass, in one transaction. Incremental (it looks at the jobs changed since the last pass,
        see ``scheduling``) unless ``full`` is asked, the scheduler's view is stale or the periodic full pass is
        due; a full pass rebuilds the view from every active job and node."""
        now = self.clock()
        sched = self.scheduling
        began, kind = time.perf_counter(), "incremental"
        try:
            heard = self._take_heard()
            if full or sched.needs_reload(now):
                self.clusters.invalidate()  # the safety net reads the configuration from the store too
            with self.db.session() as s:
                self._fence(s)
                clu = self.clusters.get(s)
                if full or sched.needs_full(now, clu):
                    nodes = store_nodes.list_nodes(s)
                    reload = full or sched.needs_reload(now)
                    jobs = (store_jobs.active_jobs(s) if reload
                            else sched.refresh(store_jobs.get_jobs_by_id(s, sched.take_changed())))
                    if reload:
                        self._elastic = {j.id: j.spec.is_elastic for j in jobs}
                    sched.durations.load(s, jobs, now, renew=True)
                    self._reach(heard, jobs)
                    held, held_reasons = hold_back(jobs, clu)
                    quotas = cluster.quotas(clu, cluster.cluster_total(nodes))
                    snapshot = build_snapshot(now, nodes, jobs, quotas, clu.config.scheduler, sched.durations.of,
                                              held)
                    sched.rebuild(snapshot, clu, held_reasons, jobs, now, reloaded=reload)
                    self.heartbeats.forget_all()  # the safety net for the quiet view too
                    decision = sched.run(now, full=True)
                    by_key = {j.key: j for j in jobs}
                    kind = "full"
                else:
                    changed = store_jobs.get_jobs_by_id(s, sched.take_changed())
                    self._reach(heard, changed)
                    sched.durations.load(s, changed, now)
                    sched.follow(changed)
                    decision = sched.run(now)
                    keys = ([a.job for a in decision.admissions] + [p.victim for p in decision.preemptions]
                            + [z.job for z in decision.resizes])
                    by_key = {j.key: j for j in store_jobs.get_jobs_by_id(s, [sched.ids[k] for k in keys])}
                    nodes = None  # nodes start draining only through invalidate: the full pass moves their jobs
                self._act(s, decision, by_key, nodes, now)
                store_jobs.set_waiting_reasons(s, sched.reasons_to_store(decision))
        except BaseException:
            sched.invalidate(reload=True)  # the pass's changes were rolled back: its view is no longer the store's
            raise
        self.metrics.pass_seconds.labels(kind).observe(time.perf_counter() - began)
        return decision

    def _act(self, s: Session, decision: Decision, by_key: dict[str, Job], nodes: list[Node] | None,
             now: float) -> None:
        """Bind and start the admitted jobs, stop the victims; with ``nodes`` (a full pass), also move the jobs off
        draining nodes."""
        admissions, later = (decision.admissions[:self.config.admissions_per_pass],
                             decision.admissions[self.config.admissions_per_pass:])
        placed = {p.node for a in admissions for p in a.placements} | {
            p.node for z in decision.resizes for p in z.placements}
        led = ledgers(store_nodes.get_nodes(s, placed), store_jobs.held_tasks_on(s, placed)) if placed else {}
        told: list[Job] = []
        for adm in admissions:
            job = by_key[adm.job]
            try:
                bindings = tuple(
                    Bound(p.role, p.index, p.node, led[p.node].node.address,
                          *bind_task(led[p.node], job.spec.role(p.role)))
                    for p in adm.placements
                )
            except BindingError as e:
                log.warning("admission skipped job=%s node=%s reason=%s", job.key, e.node, e.what)
                self.scheduling.changed(job.id)  # the scheduler counts it as started: the next pass corrects that
                continue
            by_key[job.key] = job = self._apply(s, job, Admitted(now, bindings))
            store_jobs.save_job(s, job)
            told.append(job)
            log.info("job admitted job=%s placements=%s", job.key,
                     ",".join(f"{p.role}[{p.index}]@{p.node}" for p in adm.placements))
        for pre in decision.preemptions:
            by_key[pre.victim] = victim = self._apply(s, by_key[pre.victim],
                                                      Preempted(now, pre.preemptor, pre.rule, pre.message))
            store_jobs.save_job(s, victim)
            told.append(victim)
            log.info("job preempted job=%s preemptor=%s rule=%s", pre.victim, pre.preemptor, pre.rule)
        for z in decision.resizes:
            self._resize(s, z, by_key, led, now)
        self.scheduling.settled(told)
        if later:
            self.scheduling.postpone([by_key[a.job] for a in later])
            log.info("admissions left to the next pass count=%d", len(later))
        for victim in draining_victims(nodes or [], by_key.values()):
            victim = self._apply(s, victim, Preempted(now, "node drain", "drain", drain_message(victim, nodes or [])))
            store_jobs.save_job(s, victim)
            log.info("job moved off a draining node job=%s", victim.key)

    def _resize(self, s: Session, z: Resize, by_key: dict[str, Job], led: dict[str, NodeLedger], now: float) -> None:
        """Grow or shrink an elastic job as the pass decided; the next pass follows its new members."""
        job = by_key.get(z.job)
        if job is None:
            return
        try:
            bindings = tuple(Bound(p.role, p.index, p.node, led[p.node].node.address,
                                   *bind_task(led[p.node], job.spec.role(p.role))) for p in z.placements)
        except BindingError as e:
            log.warning("resize skipped job=%s node=%s reason=%s", job.key, e.node, e.what)
            self.scheduling.invalidate()  # the scheduler counts the growth: the next (full) pass corrects that
            return
        event = Resized(now, z.role, z.size_to, z.cause.value, z.message, bindings, z.removed)
        by_key[job.key] = job = self._apply(s, job, event)
        store_jobs.save_job(s, job)
        log.info("job resized job=%s role=%s size=%d->%d cause=%s", job.key, z.role, z.size_from, z.size_to,
                 z.cause.value)

    def take_touched(self) -> set[str]:
        """The nodes with a task that changed (bound, stopping, ended) since the last call: their agents have
        something to start or stop, or a report to make, now rather than at their next heartbeat."""
        touched, self._touched = self._touched, set()
        return touched

    def _apply(self, s: Session, job: Job, event: Event) -> Job:
        new, cmds = on_event(job, event, self.ids)
        self.scheduling.changed(new.id)
        self.metrics.job_changed(job, new, event)
        before = {(t.role, t.index): t for t in job.tasks}  # by key: an elastic job's members come and go
        after = {(t.role, t.index): t for t in new.tasks}
        for key in before.keys() | after.keys():
            old_task, new_task = before.get(key), after.get(key)
            if old_task != new_task:
                nodes = [t.node for t in (old_task, new_task) if t is not None and t.node]
                self._touched.update(nodes)
                self.heartbeats.forget(nodes)
        if members_of(new) != members_of(job):  # every task of the job hears of its new membership now
            nodes = [t.node for t in new.tasks if t.node]
            self._touched.update(nodes)
            self.heartbeats.forget(nodes)
        self._record(s, new, cmds, event.now)
        if new.state is not job.state:
            log.info("job state job=%s %s->%s", job.key, job.state.value, new.state.value)
        return new

    def _record(self, s: Session, job: Job, cmds: Iterable[Command], now: float) -> None:
        for c in cmds:
            if isinstance(c, AttemptStarted):
                t = c.task
                assert t.attempt_id is not None
                history.record_attempt(
                    s,
                    TaskAttempt(t.attempt_id, job.id, c.job_attempt, t.role, t.index, t.node, t.state, started_at=now),
                )
            elif isinstance(c, AttemptRunning):
                assert c.task.attempt_id is not None
                history.mark_attempt_running(s, c.task.attempt_id, c.task.started_at or now)
            elif isinstance(c, AttemptEnded):
                t = c.task
                assert t.attempt_id is not None
                history.finish_attempt(
                    s, t.attempt_id, state=t.state, finished_at=t.finished_at or now,
                    exit_code=t.exit_code, exit_reason=t.exit_reason,
                )
            elif isinstance(c, Note):
                history.add_event(s, job.id, now, c.kind, c.message, c.details)

    # ---- reads --------------------------------------------------------------------------------

    def node_usage(self) -> list[tuple[Node, Resources]]:
        with self.db.session() as s:
            nodes = [self._with_pending_beat(n) for n in store_nodes.list_nodes(s)]
            used = usage_by_node(nodes, store_jobs.active_jobs(s))
        return [(n, used[n.name]) for n in nodes]

    def job_counts(self) -> tuple[dict[tuple[str, str], int], dict[str, float], float]:
        """For the metrics: jobs by (state, VC), each VC's oldest waiting submission, and now."""
        with self.db.session() as s:
            return stats.count_by_state_and_vc(s), stats.oldest_waiting_by_vc(s), self.clock()

    def node_reports(self) -> list[NodeReport]:
        """Every node with what is placed on it: its usage and its tasks (the nodes list)."""
        with self.db.session() as s:
            nodes = [self._with_pending_beat(n) for n in store_nodes.list_nodes(s)]
            return node_reports(nodes, store_jobs.active_jobs(s))

    def _with_pending_beat(self, node: Node) -> Node:
        beat = self.heartbeats.pending(node.name)
        return node if beat is None or beat <= node.last_heartbeat else replace(node, last_heartbeat=beat)
