"""What each VC (and each user in it) uses during a pass, against its guarantee and max."""

from __future__ import annotations

from dataclasses import dataclass, field

from pai.domain.resources import ZERO, Resources
from pai.vc.snapshot import VcQuota


@dataclass(slots=True)
class VcLedger:
    quota: VcQuota  # guarantees already resolved (``default`` holds the rest)
    max: Resources  # the quota's max, or the whole cluster
    used: Resources = ZERO  # running (including jobs being preempted), admitted and planned in this pass
    leaving: Resources = ZERO  # jobs being preempted and victims chosen in this pass
    user_gpu: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.quota.name

    @property
    def guaranteed(self) -> Resources:
        return self.quota.guaranteed

    @property
    def settled(self) -> Resources:
        """What the VC will use once the jobs being preempted have exited."""
        return self.used - self.leaving

    # The checks below run for every waiting job of every pass: they compare field by field rather than
    # build intermediate Resources values.

    def fits_max_now(self, request: Resources) -> bool:
        u, m = self.used, self.max
        return (u.gpu + request.gpu <= m.gpu and u.cpu + request.cpu <= m.cpu
                and u.memory_mb + request.memory_mb <= m.memory_mb)

    def fits_max_after(self, request: Resources, freed: Resources = ZERO) -> bool:
        return self._settled_fits(request, freed, self.max)

    def within_guarantee(self, request: Resources, freed: Resources = ZERO) -> bool:
        return self._settled_fits(request, freed, self.quota.guaranteed)

    def _settled_fits(self, request: Resources, freed: Resources, limit: Resources) -> bool:
        u, lv = self.used, self.leaving
        return (u.gpu - lv.gpu - freed.gpu + request.gpu <= limit.gpu
                and u.cpu - lv.cpu - freed.cpu + request.cpu <= limit.cpu
                and u.memory_mb - lv.memory_mb - freed.memory_mb + request.memory_mb <= limit.memory_mb)

    def over_guarantee(self, request: Resources, freed: Resources = ZERO) -> Resources:
        """How far past its guarantee the VC would be with ``request`` once ``freed`` is gone (0 where within)."""
        return (self.settled - freed + request - self.quota.guaranteed).clamp0()

    def above_guarantee_on(self, needed: Resources, freed: Resources = ZERO) -> bool:
        """Above its guarantee on some resource that ``needed`` asks for: may still give something back."""
        u, lv, g = self.used, self.leaving, self.quota.guaranteed
        return ((needed.gpu > 0 and u.gpu - lv.gpu - freed.gpu > g.gpu)
                or (needed.cpu > 0 and u.cpu - lv.cpu - freed.cpu > g.cpu)
                or (needed.memory_mb > 0 and u.memory_mb - lv.memory_mb - freed.memory_mb > g.memory_mb))

    def user_fits(self, user: str, gpu: int) -> bool:
        limit = self.quota.gpu_limit_for(user)
        return limit is None or gpu == 0 or self.user_gpu.get(user, 0) + gpu <= limit

    def add(self, user: str, request: Resources) -> None:
        self.used = self.used + request
        self.user_gpu[user] = self.user_gpu.get(user, 0) + request.gpu

    def remove(self, user: str, request: Resources) -> None:
        self.used = self.used - request
        self.user_gpu[user] = self.user_gpu.get(user, 0) - request.gpu

    def mark_leaving(self, request: Resources) -> None:
        self.leaving = self.leaving + request

    def unmark_leaving(self, request: Resources) -> None:
        self.leaving = self.leaving - request

    def idle_guarantee(self) -> Resources:
        return (self.guaranteed - self.settled).clamp0()

    def held_back(self) -> Resources:
        """Idle guarantee the VC does not lend: others may not borrow it."""
        idle = self.idle_guarantee()
        limit = self.quota.lending_limit
        if limit is None:
            return ZERO
        return (idle - limit).clamp0()
