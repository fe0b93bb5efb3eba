"""The master's Prometheus metrics.

Two kinds. What *happens* (a scheduling pass, a job admitted after waiting, a preemption, a retry, a REST request)
is counted as it happens into ``LauncherMetrics``'s registry: one per master, so that test masters in one process
do not share counters. What *is* (nodes by state, resources per node and per VC, jobs by state) is read from the
store when Prometheus scrapes (``ClusterGauges``), so it cannot drift from the store. Names and labels are listed
in docs/operations.md; the alert rules in deploy/prometheus/ use them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from pai.domain.job import Job
from pai.domain.node import Node, NodeState
from pai.domain.resources import Resources
from pai.domain.states import JobState
from pai.launcher.exit_codes import classify
from pai.launcher.lifecycle import Admitted, Event, Exited, Preempted, Resized
from pai.protocol.problems import ProblemKind, kind_of

# Seconds a job waits for its admission: from a second to over a day (a GPU queue's range).
WAITING_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, float("inf"))
PASS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, float("inf"))
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1000, float("inf"))
LEASE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, float("inf"))
REST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, float("inf"))
MB = 1024 * 1024


class LauncherMetrics:
    """The counters and histograms of one master, fed by the launcher (jobs, passes) and the REST middleware."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)  # the master's own CPU, memory and open files (process_*)
        self.pass_seconds = Histogram("pai_scheduling_pass_duration_seconds", "Duration of a scheduling pass",
                                      ["kind"], buckets=PASS_BUCKETS, registry=r)
        self.waiting_seconds = Histogram(
            "pai_job_waiting_seconds", "Time a job waited in its VC's queue before an admission (from its "
            "submission, or from its requeue for a retry)", ["virtual_cluster"], buckets=WAITING_BUCKETS, registry=r)
        self.preemptions = Counter("pai_preemptions", "Jobs preempted, by the scheduler's rule",
                                   ["rule", "virtual_cluster"], registry=r)
        self.resizes = Counter("pai_job_resizes", "Elastic jobs' roles grown or shrunk, by the scheduler's cause",
                               ["cause", "virtual_cluster"], registry=r)
        self.retries = Counter("pai_job_retries", "Jobs requeued for another attempt, by the exit type that "
                               "ended the last one", ["exit_type", "virtual_cluster"], registry=r)
        self.rest_seconds = Histogram("pai_rest_request_duration_seconds", "REST requests, by route",
                                      ["method", "route", "status_class"], buckets=REST_BUCKETS, registry=r)
        # the launcher's lease (pai.launcher.role): whether this master leads, at which epoch, how long a renewal
        # (or an attempt to acquire) takes, and how often this master's role changed
        self.leader = Gauge("pai_master_leader", "1 while this master's launcher leads, 0 while it is a standby",
                            registry=r)
        self.epoch = Gauge("pai_master_epoch", "The epoch (fencing token) this master's launcher leads at; 0 before "
                           "it has led", registry=r)
        self.lease_seconds = Histogram("pai_master_lease_renewal_seconds", "Time one attempt to acquire or renew "
                                       "the launcher's lease took", buckets=LEASE_BUCKETS, registry=r)
        self.leader_changes = Counter("pai_master_leader_changes", "Times this master's launcher became leader or "
                                      "stepped down", ["change"], registry=r)
        # experiments (pai.launcher.experiments): how long the searcher took to decide, how many decisions
        self.decide_seconds = Histogram("pai_searcher_decide_seconds", "Time the searcher took to decide an "
                                        "experiment's next step (Optuna, replaying its records)", ["searcher"],
                                        buckets=PASS_BUCKETS, registry=r)
        # trial reports (pai.rest_server.reports): how many went in one transaction (this process's: on PostgreSQL
        # each API worker batches its own)
        self.report_batch = Histogram("pai_trial_report_batch_size", "Trial reports stored in one transaction",
                                      buckets=BATCH_BUCKETS, registry=r)
        # the writer thread (pai.launcher.loop.StoreThread): what held it, and how long (a report waits for it)
        self.writer_seconds = Histogram("pai_store_writer_seconds", "Time a call held the store's writer thread, by "
                                        "call (its function)", ["call"], buckets=PASS_BUCKETS, registry=r)
        # SQLite's checkpoints (pai.rest_server.app, ADR 0005): their time, and the log's size after each
        self.checkpoint_seconds = Histogram("pai_sqlite_checkpoint_seconds", "Time a checkpoint of SQLite's "
                                            "write-ahead log took, by where it ran", ["on"], buckets=PASS_BUCKETS,
                                            registry=r)
        self.wal_pages = Gauge("pai_sqlite_wal_pages", "Pages in SQLite's write-ahead log at the last checkpoint",
                               registry=r)
        # heartbeats that needed the store (pai.launcher.service): the jobs they loaded whole (those they changed,
        # started a task of or told the members of, and any not seen before), not every job on their nodes
        self.heartbeat_jobs_loaded = Counter("pai_heartbeat_jobs_loaded", "Jobs the heartbeats that needed the "
                                             "store loaded whole (decoded)", registry=r)
        self._requeued_at: dict[str, float] = {}  # job id -> when it went back to the queue (until admitted)

    def job_changed(self, old: Job, new: Job, event: Event) -> None:
        """A lifecycle event was applied (``old`` -> ``new``)."""
        if isinstance(event, Admitted):
            since = self._requeued_at.pop(new.id, None) if old.attempt_index else old.submitted_at
            if since is not None:  # a requeue before this master started is not known: not observed
                self.waiting_seconds.labels(new.vc).observe(max(0.0, event.now - since))
        elif isinstance(event, Preempted):
            self.preemptions.labels(event.rule, new.vc).inc()
        elif isinstance(event, Resized) and new.last_resized_at == event.now:
            self.resizes.labels(event.cause, new.vc).inc()
        if new.attempt_index > old.attempt_index:
            exit_type = classify(event.exit_code).type.value if isinstance(event, Exited) else "Platform"
            self.retries.labels(exit_type, new.vc).inc()
            self._requeued_at[new.id] = event.now
        if new.state.is_terminal():
            self._requeued_at.pop(new.id, None)

    def render(self, gauges: ClusterGauges) -> bytes:
        """The exposition text: this master's counters, then the cluster as the store has it now."""
        now = CollectorRegistry()
        now.register(gauges)
        return generate_latest(self.registry) + generate_latest(now)


@dataclass(frozen=True, slots=True)
class VcUsage:
    name: str
    guaranteed: Resources
    maximum: Resources
    used: Resources
    borrowed: Resources
    running: int
    waiting: int


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: a registry keys its collectors
class ClusterGauges(Collector):
    """The cluster at one moment, as gauges (a collector registered for one scrape)."""

    nodes: Sequence[tuple[Node, Resources]]  # each node with what its tasks use
    vcs: Sequence[VcUsage]
    jobs: dict[tuple[str, str], int] = field(default_factory=dict)  # (state, vc) -> count
    waiting_since: dict[str, float] = field(default_factory=dict)  # vc -> its oldest waiting job's submission
    now: float = 0.0

    def collect(self) -> Iterator[Metric]:
        yield self._node_states()
        yield from self._node_resources()
        yield from self._vc_resources()
        jobs = GaugeMetricFamily("pai_jobs", "Jobs by state and VC", labels=["state", "virtual_cluster"])
        vcs = sorted({vc for _, vc in self.jobs} | {v.name for v in self.vcs})
        for state in JobState:
            for vc in vcs:
                jobs.add_metric([state.value, vc], self.jobs.get((state.value, vc), 0))
        yield jobs

    def _node_states(self) -> Metric:
        family = GaugeMetricFamily("pai_nodes", "Nodes by state", labels=["state"])
        for state in NodeState:
            family.add_metric([state.value], sum(1 for n, _ in self.nodes if n.state is state))
        return family

    def _node_resources(self) -> Iterable[Metric]:
        labels = ["node"]
        heartbeat = GaugeMetricFamily("pai_node_last_heartbeat_timestamp_seconds", "Last heartbeat", labels=labels)
        healthy = GaugeMetricFamily("pai_node_healthy", "1 when the agent reports no problem", labels=labels)
        failed = GaugeMetricFamily("pai_node_failed_gpus", "GPUs the agent reports unhealthy", labels=labels)
        problems = GaugeMetricFamily("pai_node_problems", "Health problems the agent reports, by kind (disk_full, "
                                     "read_only, low_disk, ...; 0 for each kind it does not)",
                                     labels=["node", "reason"])
        state = GaugeMetricFamily("pai_node_state", "1 for the state the node is in", labels=["node", "state"])
        families = _resource_families("pai_node", "node", ("capacity", "used", "free"))
        for node, used in self.nodes:
            heartbeat.add_metric([node.name], node.last_heartbeat)
            state.add_metric([node.name, node.state.value], 1)
            healthy.add_metric([node.name], 0 if node.problems or node.failed_gpus else 1)
            failed.add_metric([node.name], len(node.failed_gpus))
            found = [kind_of(p) for p in node.problems]
            for problem_kind in ProblemKind:
                problems.add_metric([node.name, problem_kind.label], found.count(problem_kind))
            free = (node.total - used).clamp0()
            for kind, amount in (("capacity", node.total), ("used", used), ("free", free)):
                _add(families, kind, [node.name], amount)
        return [heartbeat, healthy, failed, problems, state, *families.values()]

    def _vc_resources(self) -> Iterable[Metric]:
        kinds = ("guaranteed", "max", "used", "borrowed")
        families = _resource_families("pai_vc", "virtual_cluster", kinds)
        jobs = GaugeMetricFamily("pai_vc_jobs", "A VC's running and waiting jobs", labels=["virtual_cluster", "state"])
        longest = GaugeMetricFamily("pai_vc_longest_waiting_seconds", "How long the VC's oldest waiting job has "
                                    "waited since its submission (0: none waits)", labels=["virtual_cluster"])
        for vc in self.vcs:
            for kind, amount in zip(kinds, (vc.guaranteed, vc.maximum, vc.used, vc.borrowed), strict=True):
                _add(families, kind, [vc.name], amount)
            jobs.add_metric([vc.name, "running"], vc.running)
            jobs.add_metric([vc.name, "waiting"], vc.waiting)
            since = self.waiting_since.get(vc.name)
            longest.add_metric([vc.name], 0 if since is None else max(0.0, self.now - since))
        return [*families.values(), jobs, longest]


def _resource_families(prefix: str, label: str, kinds: Sequence[str]) -> dict[tuple[str, str], GaugeMetricFamily]:
    out = {}
    for kind in kinds:
        for unit, what in (("gpus", "GPUs"), ("cpus", "CPUs"), ("memory_bytes", "memory in bytes")):
            out[(kind, unit)] = GaugeMetricFamily(f"{prefix}_{unit}_{kind}", f"{what}, {kind}", labels=[label])
    return out


def _add(families: dict[tuple[str, str], GaugeMetricFamily], kind: str, labels: list[str], r: Resources) -> None:
    families[(kind, "gpus")].add_metric(labels, r.gpu)
    families[(kind, "cpus")].add_metric(labels, r.cpu)
    families[(kind, "memory_bytes")].add_metric(labels, r.memory_mb * MB)
