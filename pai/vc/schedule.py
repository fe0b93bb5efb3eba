"""``schedule(snapshot) -> Decision``: the scheduler's one entry point."""

from __future__ import annotations

from pai.vc.round import Round
from pai.vc.snapshot import Decision, Snapshot
from pai.vc.state import State


def schedule(snapshot: Snapshot) -> Decision:
    """Admit what fits (best fit, whole gangs), preempt where policy allows, explain every job that waits."""
    return Round(State(snapshot), snapshot.pending, snapshot.now).run()
