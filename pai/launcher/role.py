"""Whether this master's launcher leads: what the Elector (``pai.launcher.leadership``) last decided, read by the
loop (a standby runs no pass, pushes nothing, times no node out) and by the agents' endpoints (a standby answers
NotLeaderError naming the leader)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from pai.domain.errors import NotLeaderError
from pai.launcher.metrics import LauncherMetrics
from pai.store import masters
from pai.store.leases import LeaseState

log = logging.getLogger("pai.launcher.role")

Hook = Callable[[], Awaitable[None]]


class Role:
    """``leading``: this launcher acts (its passes run, its agents are answered). ``leader``: the base URL of the
    master that leads, as the lease last said (None: nobody). A master without an election (the tests' launchers)
    leads from the start."""

    def __init__(self, holder: str = "", *, leading: bool = True, metrics: LauncherMetrics | None = None) -> None:
        self.holder, self.leading, self.metrics = holder, leading, metrics
        self.epoch = 0  # the term it leads at (the last it led at, once deposed)
        self.seen_epoch = 0  # the lease's epoch as the last attempt saw it
        self.leader: str | None = masters.url_of(holder) if leading and holder else None
        self.on_deposed: Hook | None = None  # called when a fenced write shows that the lease has moved on

    def require(self) -> None:
        """Raise NotLeaderError unless this launcher leads."""
        if not self.leading:
            raise NotLeaderError(self.leader)

    def saw(self, lease: LeaseState) -> None:
        """What an attempt at the lease came back with: who leads."""
        self.seen_epoch = lease.epoch
        self.leader = masters.url_of(lease.holder)

    def lead(self, epoch: int) -> None:
        self.leading, self.epoch, self.leader = True, epoch, masters.url_of(self.holder)
        if self.metrics is not None:
            self.metrics.leader.set(1)
            self.metrics.epoch.set(epoch)
            self.metrics.leader_changes.labels("elected").inc()

    def stand_by(self) -> bool:
        """Stop acting; False when it was not leading."""
        if not self.leading:
            return False
        self.leading = False
        if self.leader == masters.url_of(self.holder):
            self.leader = None
        if self.metrics is not None:
            self.metrics.leader.set(0)
            self.metrics.leader_changes.labels("deposed").inc()
        return True

    async def fenced(self) -> None:
        """A write of this launcher was fenced off: it steps down now (the Elector will find out too)."""
        if self.stand_by():
            log.warning("stepping down: a write was fenced off holder=%s epoch=%d", self.holder, self.epoch)
            if self.on_deposed is not None:
                await self.on_deposed()
