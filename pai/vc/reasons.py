"""Why a job waits: structured codes with a message a person can act on."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pai.vc.snapshot import WaitingReason


class WaitCode(StrEnum):
    QUEUED = "Queued"  # nothing wrong: waits for the next pass
    NO_NODE_FITS = "NoNodeFits"  # free capacity is too small or too scattered now
    NEVER_FITS = "NeverFits"  # larger than the cluster could ever hold: fix the job
    VC_AT_MAX = "VcAtMax"  # its VC would pass its max
    USER_LIMIT = "UserLimit"  # its user would pass the per-user limit of the VC
    LENDING_LIMIT = "LendingLimit"  # borrowing would use guarantee another VC keeps for itself
    WAITING_FOR_PREEMPTION = "WaitingForPreemption"  # victims are being stopped for it
    PREEMPTION_DEFERRED = "PreemptionDeferred"  # it may preempt, but this pass's preemption budget is used up
    HELD_FOR_RESERVATION = "HeldForReservation"  # nodes that fit are held for a starving gang
    HELD_BY_NON_PREEMPTIBLE = "HeldByNonPreemptible"  # it would preempt its way in, but that work is non-preemptible
    STRICT_FIFO = "StrictFifo"  # its VC is strict FIFO and an earlier job waits
    UNKNOWN_VC = "UnknownVc"  # the VC does not exist

    @property
    def user_must_act(self) -> bool:
        """True when waiting longer will not help: the job or the configuration must change."""
        return self in (WaitCode.NEVER_FITS, WaitCode.UNKNOWN_VC)

    def reason(self, message: str, position: int = 0, **figures: Any) -> WaitingReason:
        return WaitingReason(self.value, message, position, figures)


def with_position(reason: WaitingReason, position: int) -> WaitingReason:
    return WaitingReason(reason.code, reason.message, position, reason.figures)
