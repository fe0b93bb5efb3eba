"""Administering the cluster configuration (VCs, storages) and VC reports: one transaction each, on the store
thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from pai.domain.errors import ConflictVirtualClusterError, InvalidParametersError, NoStorageError
from pai.domain.resources import ZERO, Resources
from pai.launcher import cluster, storages
from pai.launcher.accounts import Accounts
from pai.launcher.usage import usage_by_vc
from pai.store import generations, vcs, wakeups
from pai.store import jobs as store_jobs
from pai.store import nodes as store_nodes
from pai.store.db import Database
from pai.store.vcs import VcStatus
from pai.vc import VcQuota
from pai.vc.config import parse_config


@dataclass(frozen=True, slots=True)
class VcReport:
    quota: VcQuota
    status: VcStatus
    spec: dict[str, Any]
    total: Resources
    used: Resources
    running: int
    pending: int

    @property
    def borrowed(self) -> Resources:
        return (self.used - self.quota.guaranteed).clamp0()


class VcAdmin:
    def __init__(self, db: Database, clock: Callable[[], float], clusters: cluster.ClusterCache,
                 accounts: Accounts | None = None) -> None:
        self.db = db
        self.clock = clock
        self.clusters = clusters  # the launcher's: each write below invalidates it once committed (and bumps the
        # generations, which every process's caches follow)
        self.accounts = accounts  # a VC's group comes and goes with it: users' rights are re-read after a write

    @contextmanager
    def _writing(self) -> Iterator[Session]:
        """A transaction that changes the configuration. It bumps the "cluster" generation, and the "accounts" one
        (a VC's group comes and goes with it), so that every process's caches reload them, and wakes the leading
        launcher; this process's own caches are dropped after it as well."""
        try:
            with self.db.session() as s:
                yield s
                generations.bump(s, generations.CLUSTER, generations.ACCOUNTS)
                wakeups.cluster_changed(s)  # the leader's next pass reads it again (and at once)
        finally:
            self.clusters.invalidate()
            if self.accounts is not None:
                self.accounts.invalidate()

    def reports(self) -> list[VcReport]:
        with self.db.session() as s:
            clu = self.clusters.get(s)
            total = cluster.cluster_total(store_nodes.list_nodes(s))
            quotas = cluster.quotas(clu, total)
            usage = usage_by_vc(store_jobs.active_jobs(s), [q.name for q in quotas])
            status = {q.name: clu.vc_status(q.name) or VcStatus.RUNNING for q in quotas}
            return [
                VcReport(q, status[q.name], clu.specs.get(q.name, {"name": q.name}), total, usage[q.name].used,
                         usage[q.name].running, usage[q.name].waiting)
                for q in quotas
            ]

    def put(self, spec: dict[str, Any]) -> None:
        """Create or replace a VC (a validated entry of the configuration's ``virtualClusters``)."""
        with self._writing() as s:
            clu = cluster.load(s)
            specs = [v for v in (clu.specs or {}).values() if v["name"] != spec["name"]]
            doc = cluster.document([], {})
            doc["virtualClusters"] = [*specs, spec]
            candidate = parse_config(doc)
            total = cluster.cluster_total(store_nodes.list_nodes(s))
            if total != ZERO:
                candidate.quotas(total)  # guarantees must fit the cluster as it is now
            vcs.put_vc(s, spec, self.clock())
            cluster.ensure_vc_group(s, spec["name"], self.clock())

    def update(self, name: str, changes: dict[str, Any], validate: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Change some fields of a VC (or create it with them), keeping the rest of its definition."""
        with self.db.session() as s:
            current = cluster.load(s).specs.get(name, {"name": name})
        self.put(validate({**current, **changes}))

    def set_status(self, name: str, status: VcStatus) -> None:
        with self._writing() as s:
            if name == cluster.DEFAULT_VC and not vcs_has(s, name):
                vcs.put_vc(s, {"name": name}, self.clock(), status)
            else:
                vcs.set_vc_status(s, name, status, self.clock())

    def delete(self, name: str) -> None:
        if name == cluster.DEFAULT_VC:
            raise InvalidParametersError("the default VC holds the rest of the cluster and cannot be removed",
                                         field="vc")
        with self._writing() as s:
            vcs.get_vc(s, name)
            active = [j.key for j in store_jobs.active_jobs(s) if j.vc == name]
            if active:
                raise ConflictVirtualClusterError(
                    f"VC {name} still has {len(active)} active jobs (e.g. {active[0]}); stop them or wait"
                )
            vcs.delete_vc(s, name)
            cluster.forget_vc_groups(s, name)

    def put_storage(self, spec: dict[str, Any]) -> bool:
        """Create or replace one storage (a validated entry of the configuration's ``storages``); True if new."""
        with self._writing() as s:
            section: list[dict[str, Any]] = vcs.get_setting(s, storages.SECTION) or []
            new = all(d["name"] != spec["name"] for d in section)
            section = [spec if d["name"] == spec["name"] else d for d in section] + ([spec] if new else [])
            storages.parse(section)
            vcs.put_setting(s, storages.SECTION, section)
            return new

    def delete_storage(self, name: str) -> None:
        """Remove one storage; jobs that mount it keep the host path they were accepted with."""
        with self._writing() as s:
            section: list[dict[str, Any]] = vcs.get_setting(s, storages.SECTION) or []
            if all(d["name"] != name for d in section):
                raise NoStorageError(f"storage {name} not found")
            vcs.put_setting(s, storages.SECTION, [d for d in section if d["name"] != name])

    def apply_file(self, doc: dict[str, Any]) -> None:
        with self._writing() as s:
            cluster.apply_file(s, doc, self.clock())


def vcs_has(s: Session, name: str) -> bool:
    return any(v.name == name for v in vcs.list_vcs(s))
