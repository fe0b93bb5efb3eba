"""``schedule(snapshot) -> Decision``: the scheduler's one entry point."""

from __future__ import annotations

from pai.vc.elastic import grow
from pai.vc.round import Round
from pai.vc.snapshot import Decision, Snapshot
from pai.vc.state import State


def schedule(snapshot: Snapshot) -> Decision:
    """Admit what fits (best fit, whole gangs), preempt where policy allows, explain every job that waits; then
    shrink running elastic jobs before preempting whole ones, grow them into what is left idle (pai.vc.elastic)."""
    r = Round(State(snapshot), snapshot.pending, snapshot.now, elastic=True)
    decision = r.run()
    if any(j.elastic for j in snapshot.running):
        decision = grow(r, decision, shrunk={z.job for z in decision.resizes})
    return decision
