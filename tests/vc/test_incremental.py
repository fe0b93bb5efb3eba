"""IncrementalScheduler: its first pass is schedule(); after events its state matches a rebuilt one."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pai.domain.resources import ZERO, Resources
from pai.vc import Decision, Snapshot, schedule
from pai.vc.incremental import IncrementalScheduler
from pai.vc.state import State
from tests.vc.test_properties import _check, snapshots
from tests.vc.vc_builders import admitted, job, node, running, snap


def _equivalent(s: Snapshot, inc: IncrementalScheduler) -> Snapshot:
    """The snapshot a launcher would build now: nodes' used and free ports from the jobs that run."""
    ports = Counter[str]()
    for r in s.running:
        for t, n in r.tasks:
            ports[n] += t.ports  # the original free_ports already left these out
    used: dict[str, Resources] = {}
    for r in inc.running.values():
        for t, n in r.tasks:
            used[n] = used.get(n, ZERO) + t.resources
            ports[n] -= t.ports
    nodes = tuple(replace(n, used=used.get(n.name, ZERO), free_ports=n.free_ports + ports[n.name]) for n in s.nodes)
    return replace(s, nodes=nodes, running=tuple(inc.running.values()), pending=tuple(inc.pending.values()))


def _same_state(a: State, b: State) -> None:
    for attr in ("free_gpu", "free_cpu", "free_mem", "free_ports", "tasks_on", "open"):
        assert getattr(a.pool, attr) == getattr(b.pool, attr), attr
    for name, v in a.vcs.items():
        w = b.vcs[name]
        assert (v.used, v.leaving) == (w.used, w.leaving), name
        assert {u: g for u, g in v.user_gpu.items() if g} == {u: g for u, g in w.user_gpu.items() if g}, name
    assert a.used_all == b.used_all


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(), st.data())
def test_state_after_events_matches_a_rebuilt_one(s: Snapshot, data: st.DataObject) -> None:
    inc = IncrementalScheduler(s)
    first = inc.schedule(s.now)
    assert first == schedule(s)
    now = s.now
    for step in range(data.draw(st.integers(1, 4))):
        now += 10
        keys = sorted(inc.running)
        for key in data.draw(st.lists(st.sampled_from(keys), unique=True, max_size=3)) if keys else []:
            inc.finished(key)
        if inc.pending and data.draw(st.booleans()):
            inc.cancel(data.draw(st.sampled_from(sorted(inc.pending))))
        if data.draw(st.booleans()) and s.pending:
            inc.submit(replace(data.draw(st.sampled_from(s.pending)), key=f"new{step}", submitted_at=now))
        before = _equivalent(s, inc)
        _same_state(inc.state, State(before))
        d = inc.schedule(now)
        _check(replace(before, now=now), d)
    _same_state(inc.state, State(_equivalent(s, inc)))


def test_a_finished_job_makes_room_for_a_waiting_one() -> None:
    inc = IncrementalScheduler(snap([node("n0", 8)], [job("a", 6, at=0), job("b", 4, at=1)]))
    assert set(admitted(inc.schedule(100))) == {"a"}
    assert set(admitted(inc.schedule(101))) == set()
    inc.finished("a")
    assert admitted(inc.schedule(102)) == {"b": {"main-0": "n0"}}
    assert set(inc.running) == {"b"} and not inc.pending


def test_victims_become_jobs_being_stopped_for_their_preemptor() -> None:
    inc = IncrementalScheduler(snap([node("n0", 8)], [job("p", 8, priority=100)], [running("low", "n0", 8)]))
    d = inc.schedule(100)
    assert [(x.victim, x.preemptor) for x in d.preemptions] == [("low", "p")]
    assert (inc.running["low"].preempting, inc.running["low"].preempted_by) == (True, "p")
    again = inc.schedule(101)  # no second preemption while the victim exits
    assert not again.preemptions and again.waiting["p"].code == "WaitingForPreemption"
    inc.finished("low")
    assert admitted(inc.schedule(102)) == {"p": {"main-0": "n0"}}


def test_a_vc_back_within_its_guarantee_reclaims_at_the_next_incremental_pass() -> None:
    from tests.vc.vc_builders import vc

    # VC a (guarantee 8) runs `own` (4 GPUs) and waits with `more` (8): `more` would pass a's guarantee, so it
    # may not reclaim from b, which borrows the other 4 GPUs of the node.
    s = snap([node("n0", 8)], [job("more", 8, vc="a", at=5)],
             [running("own", "n0", 4, vc="a"), running("borrowed", "n0", 4, vc="b", started=1)],
             vcs=[vc("a", 8), vc("b", 0)])
    inc = IncrementalScheduler(s)
    first = inc.schedule(100)
    assert not first.preemptions and first.waiting["more"].code == "NoNodeFits"
    inc.finished("own")  # a is back under its guarantee: the search that found no allowed victim is retried
    d = inc.schedule(101)
    assert [(p.victim, p.preemptor) for p in d.preemptions] == [("borrowed", "more")]


def test_a_finish_that_cannot_change_what_a_vc_may_reclaim_keeps_its_searches() -> None:
    from tests.vc.vc_builders import vc

    # a is far past its guarantee (1): finishing one of its small jobs still leaves it past, so `more` still
    # may not reclaim and the incremental pass agrees with a full one.
    s = snap([node("n0", 8), node("n1", 8)], [job("more", 8, vc="a", at=5)],
             [running("a1", "n0", 2, vc="a"), running("a2", "n0", 2, vc="a"),
              running("b1", "n1", 8, vc="b", started=1)],
             vcs=[vc("a", 1), vc("b", 0)])
    inc = IncrementalScheduler(s)
    inc.schedule(100)
    inc.finished("a1")
    d = inc.schedule(101)
    assert not d.preemptions
    rebuilt = schedule(replace(_equivalent(s, inc), now=101))
    assert not rebuilt.preemptions


def _by_fit(d: Decision, before: Snapshot) -> tuple[object, ...]:
    """What a pass decides, a placement named by what best fit ranks nodes by (GPU type, free GPUs when the pass
    began): among equally full nodes the first in the bucket is taken, and the order within a bucket depends on
    the attempts made before in the pass (a job an incremental pass knows still waits is not tried again)."""
    fit = {n.name: (n.gpu_type, n.usable.gpu - n.used.gpu) for n in before.nodes}
    return (sorted((a.job, sorted((p.role, p.index, fit[p.node]) for p in a.placements)) for a in d.admissions),
            sorted((p.victim, p.preemptor) for p in d.preemptions))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(snapshots(), st.data())
def test_incremental_passes_decide_what_full_passes_decide(s: Snapshot, data: st.DataObject) -> None:
    """On random workloads and events (jobs finish, are withdrawn, arrive; a running job is stopped), every
    incremental pass admits and preempts what ``schedule`` decides from a snapshot rebuilt at that moment, each task
    on a node best fit ranks the same (3,000 examples pass too; 300 fixed ones here)."""
    inc = IncrementalScheduler(s)
    assert inc.schedule(s.now) == schedule(s)
    now = s.now
    for step in range(data.draw(st.integers(1, 5))):
        now += data.draw(st.sampled_from([1, 10, 1000]))
        keys = sorted(inc.running)
        for key in data.draw(st.lists(st.sampled_from(keys), unique=True, max_size=3)) if keys else []:
            inc.finished(key)
        if inc.pending and data.draw(st.booleans()):
            inc.cancel(data.draw(st.sampled_from(sorted(inc.pending))))
        keys = sorted(k for k, r in inc.running.items() if not r.preempting)
        if keys and data.draw(st.booleans()):  # a user stops a running job: it is leaving
            inc.changed(replace(inc.running[data.draw(st.sampled_from(keys))], preempting=True))
        for k in range(data.draw(st.integers(0, 3))) if s.pending else []:
            inc.submit(replace(data.draw(st.sampled_from(s.pending)), key=f"new{step}.{k}", submitted_at=now))
        before = replace(_equivalent(s, inc), now=now)
        reference = schedule(before)
        got = inc.schedule(now)
        assert _by_fit(got, before) == _by_fit(reference, before), step
