"""The cluster configuration as the launcher uses it: VCs with their status, scheduler knobs, priority classes.

Stored in the database (``pai.store.vcs``); a configuration file given to the master is written there at
start; the REST API edits it. Amounts stay as written (percents too) and are resolved against the cluster's
current total on every pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.orm import Session

from pai.domain.errors import InvalidParametersError
from pai.domain.groups import ADMIN_GROUP, vc_group
from pai.domain.localpaths import LocalRoot
from pai.domain.node import Node, NodeState
from pai.domain.resources import ZERO, Resources
from pai.launcher import localpaths, storages
from pai.store import generations, groups, vcs
from pai.store.vcs import VcStatus
from pai.vc import VcQuota
from pai.vc.config import ClusterConfig, parse_config

log = logging.getLogger("pai.launcher.cluster")
DEFAULT_VC = "default"


@dataclass(frozen=True, slots=True)
class Cluster:
    config: ClusterConfig
    status: dict[str, VcStatus] = field(default_factory=dict)
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs_readable_by_all: bool = True  # the configuration's access.jobsReadableByAll
    local_paths: tuple[LocalRoot, ...] = ()  # the configuration's localPaths: none, no local path is allowed

    def vc_status(self, name: str) -> VcStatus | None:
        if name in self.status:
            return self.status[name]
        return VcStatus.RUNNING if any(v.name == name for v in self.config.vcs) or name == DEFAULT_VC else None


# The configuration's sections kept in cluster_settings.
SETTINGS = ("scheduler", "priorityClasses", "limits", "hdfs", "storages", "access", "nonPreemptible",
            localpaths.SECTION)


def document(stored: list[vcs.StoredVc], settings: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"virtualClusters": [v.spec for v in stored] or [{"name": DEFAULT_VC}]}
    doc.update({key: value for key, value in settings.items() if value})
    return doc


def load(s: Session) -> Cluster:
    stored = vcs.list_vcs(s)
    doc = document(stored, {key: vcs.get_setting(s, key) for key in SETTINGS})
    readable = bool((doc.get("access") or {}).get("jobsReadableByAll", True))
    return Cluster(parse_config(doc), {v.name: v.status for v in stored}, {v.name: v.spec for v in stored}, readable,
                   localpaths.parse(doc.get(localpaths.SECTION)))


class ClusterCache:
    """The cluster configuration as last loaded, for the paths that read it on every request or pass (a submission,
    a scheduling pass). Every write of the configuration bumps the "cluster" generation in its transaction
    (``pai.store.generations``; ``VcAdmin``), and ``get`` reads the generation in the caller's transaction: the
    cached configuration is used only if it was loaded at the generation the database shows now, so a change made
    through any process of any master is seen by the next ``get`` everywhere. The writer also calls ``invalidate``
    once it has committed (``cached``, which touches no database, relies on that: it is as fresh as this process's
    own writes only); the periodic full pass invalidates too, the safety net for an edit made in the database
    behind the masters' backs. A load that raced with an invalidation is used once but not kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # readers and the writer thread share it
        self._value: Cluster | None = None
        self._at = 0  # the database's generation ``_value`` was loaded at
        self._generation = 0
        self.on_invalidate: Callable[[], None] | None = None  # called after each invalidate

    def get(self, s: Session) -> Cluster:
        """The configuration as ``s``'s transaction sees it: from the cache while its generation holds."""
        at = generations.value(s, generations.CLUSTER)
        with self._lock:
            value, generation = self._value, self._generation
            if value is not None and self._at == at:
                return value
        value = load(s)
        with self._lock:
            if self._generation == generation:
                self._value, self._at = value, at
        return value

    @property
    def generation(self) -> int:
        """How many times the configuration was forgotten: a change to it changes it."""
        with self._lock:
            return self._generation

    def invalidate(self) -> None:
        """Forget the configuration: call after a committed change to it."""
        with self._lock:
            self._value = None
            self._generation += 1
        if self.on_invalidate is not None:
            self.on_invalidate()


def apply_file(s: Session, doc: dict[str, Any], now: float) -> None:
    """Write a validated configuration document: its VCs are created or replaced; its settings replace ours."""
    parse_config(doc)  # names and classes checked before anything is written
    storages.parse(doc.get("storages"))
    localpaths.parse(doc.get(localpaths.SECTION))
    for spec in doc.get("virtualClusters", []):
        vcs.put_vc(s, spec, now)
        ensure_vc_group(s, spec["name"], now)
    for key in SETTINGS:
        if key in doc:
            vcs.put_setting(s, key, doc[key])


def ensure_vc_group(s: Session, vc: str, now: float) -> None:
    """A VC has a group of its name granting it (OpenPAI's): made with the VC; a group of that name that exists
    already is kept, and grants the VC from then on."""
    if vc == ADMIN_GROUP:
        raise InvalidParametersError(f"name: {vc!r} is the name of the admins' group; choose another", field="name")
    found = groups.find_group(s, vc)
    if found is None:
        groups.create_group(s, vc_group(vc), now=now)
    elif not found.is_vc_group:
        groups.save_group(s, found.granting(vc))


def forget_vc_groups(s: Session, vc: str) -> None:
    """A removed VC: its own group goes, and no group grants it any more (OpenPAI's)."""
    own = groups.find_group(s, vc)
    for g in groups.list_groups(s):
        if vc in g.virtual_clusters and g.name != vc:
            groups.save_group(s, g.not_granting(vc))
    if own is not None and own.virtual_clusters == (vc,):
        groups.delete_group(s, vc)
    elif own is not None:  # a group of its own that grants more: kept, without the VC
        groups.save_group(s, own.not_granting(vc))


def webhdfs_for(s: Session, code_dir: str) -> str:
    """The WebHDFS address the configuration gives the namenode of an ``hdfs://`` codeDir; "" when it gives
    none (the agent then reads http://<namenode>:9870) or the codeDir is not on HDFS."""
    scheme, sep, rest = code_dir.partition("://")
    if not sep or scheme.lower() != "hdfs":
        return ""
    namenode = rest.split("/", 1)[0]
    mapping = (vcs.get_setting(s, "hdfs") or {}).get("webhdfs") or {}
    return str(mapping.get(namenode) or mapping.get(namenode.rsplit(":", 1)[0]) or "")


def default_fs(s: Session) -> str | None:
    """What ``$PAI_DEFAULT_FS_URI`` stands for in a v1 job's paths (``hdfs.defaultFs``); None when not configured."""
    value = (vcs.get_setting(s, "hdfs") or {}).get("defaultFs")
    return str(value) if value else None


def cluster_total(nodes: Iterable[Node]) -> Resources:
    """What the VCs' percents are of: every node that is not lost."""
    total = ZERO
    for n in nodes:
        if n.state is not NodeState.LOST:
            total = total + Resources(n.total.gpu - len(n.failed_gpus), n.total.cpu, n.total.memory_mb)
    return total


_last_problem: list[str] = [""]  # what was last logged, so that a problem is logged once, not every pass


def quotas(cluster: Cluster, total: Resources) -> tuple[VcQuota, ...]:
    """Absolute quotas for this pass. When the cluster shrank below the guarantees (a node lost), every VC
    keeps its max but loses its guarantee until the cluster is back: nothing is reclaimed meanwhile."""
    try:
        result = cluster.config.quotas(total)
        if _last_problem[0]:
            log.info("guarantees fit the cluster again; reclaim is on")
            _last_problem[0] = ""
        return result
    except InvalidParametersError as e:
        if e.message != _last_problem[0]:
            log.error("guarantees do not fit the cluster; reclaim is off until they do reason=%s", e.message)
            _last_problem[0] = e.message
        relaxed = replace(cluster.config, vcs=tuple(replace(v, guaranteed={}) for v in cluster.config.vcs))
        return relaxed.quotas(total)
