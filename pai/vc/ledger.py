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

    def fits_max_now(self, request: Resources) -> bool:
        return (self.used + request).fits_in(self.max)

    def fits_max_after(self, request: Resources, freed: Resources = ZERO) -> bool:
        return (self.settled - freed + request).fits_in(self.max)

    def within_guarantee(self, request: Resources, freed: Resources = ZERO) -> bool:
        return (self.settled - freed + request).fits_in(self.guaranteed)

    def above_guarantee_on(self, needed: Resources, freed: Resources = ZERO) -> bool:
        """Above its guarantee on some resource that ``needed`` asks for: may still give something back."""
        s = self.settled - freed
        g = self.guaranteed
        return ((needed.gpu > 0 and s.gpu > g.gpu) or (needed.cpu > 0 and s.cpu > g.cpu)
                or (needed.memory_mb > 0 and s.memory_mb > g.memory_mb))

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
