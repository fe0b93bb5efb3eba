"""A gang that waited long enough holds the nodes it needs against smaller jobs of lower or equal priority."""

from __future__ import annotations

import pytest

from pai.vc import schedule
from tests.vc.vc_builders import AdmitCase, admitted, codes, job, node, running, snap

SMALL_ON_BOTH = [running("r0", "n0", 1), running("r1", "n1", 1)]


Case = AdmitCase


CASES = [
    Case("before the wait limit, small jobs may take the nodes",
         snap([node("n0"), node("n1")], [job("gang", 8, instances=2, at=0), job("small", 1, at=5)], SMALL_ON_BOTH,
              now=1000, reservation_after_seconds=1800),
         {"small"}, {"gang": "NoNodeFits"}),
    Case("after the wait limit, the gang holds the nodes",
         snap([node("n0"), node("n1")], [job("gang", 8, instances=2, at=0), job("small", 1, at=5)], SMALL_ON_BOTH,
              now=2000, reservation_after_seconds=1800),
         set(), {"gang": "NoNodeFits", "small": "HeldForReservation"}),
    Case("higher priority jobs may still use held nodes",
         snap([node("n0"), node("n1")], [job("gang", 8, instances=2, at=0), job("vip", 1, priority=100, at=5)],
              SMALL_ON_BOTH, now=2000, reservation_after_seconds=1800),
         {"vip"}, {"gang": "NoNodeFits"}),
    Case("nodes the gang does not need stay available",
         snap([node("n0"), node("n1"), node("n2", 4)], [job("gang", 8, instances=2, at=0), job("small", 1, at=5)],
              [*SMALL_ON_BOTH, running("r2", "n2", 1)], now=2000, reservation_after_seconds=1800),
         {"small"}, {"gang": "NoNodeFits"}),
    Case("no reservations when they are switched off",
         snap([node("n0"), node("n1")], [job("gang", 8, instances=2, at=0), job("small", 1, at=5)], SMALL_ON_BOTH,
              now=2000, reservation_after_seconds=1800, max_reservations=0),
         {"small"}, {"gang": "NoNodeFits"}),
    Case("a gang that fits now is admitted and holds nothing",
         snap([node("n0"), node("n1")], [job("gang", 8, instances=2, at=0), job("small", 1, at=5)], now=2000,
              reservation_after_seconds=1800),
         {"gang"}, {"small": "NoNodeFits"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_reservation(case: Case) -> None:
    d = schedule(case.snapshot)
    assert set(admitted(d)) == case.admitted
    assert codes(d) == case.waiting


def test_the_starving_gang_says_what_it_holds() -> None:
    s = snap([node("n0"), node("n1")], [job("gang", 8, instances=2, at=0)], SMALL_ON_BOTH, now=2000,
             reservation_after_seconds=1800)
    reason = schedule(s).waiting["gang"]
    assert "; holding n0, n1 for it" in reason.message
    assert reason.figures["reserved"] == ["n0", "n1"]
