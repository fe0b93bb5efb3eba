"""Quota: guarantee, max, borrowing order, lending limits, per-user limits, strict FIFO; and the quota helpers."""

from __future__ import annotations

import pytest

from pai.domain.errors import InvalidParametersError
from pai.domain.resources import Resources
from pai.vc import VcQuota, schedule
from pai.vc.quota import cluster_total, effective_quotas, resolve_amount, resolve_resources, validate_guarantees
from tests.vc.vc_builders import AdmitCase, admitted, codes, job, node, nodes, running, snap, vc

Case = AdmitCase


CASES = [
    Case("max applies even when nodes are idle",
         snap(nodes(2), [job("big", 8, vc="dev"), job("ok", 4, vc="dev", at=1)], vcs=[vc("dev", 0, max=4)]),
         {"ok"}, {"big": "VcAtMax"}),
    Case("max counts running jobs of the VC",
         snap(nodes(2), [job("a", 4, vc="dev")], [running("r", "node-0", 2, vc="dev")], vcs=[vc("dev", 0, max=5)]),
         set(), {"a": "VcAtMax"}),
    Case("jobs within their guarantee go before borrowing jobs of higher priority",
         snap([node("n0")], [job("a1", 4, vc="a", priority=100, at=0), job("b1", 4, vc="b", priority=10, at=1)],
              [running("ra", "n0", 4, vc="a", priority=100)], [vc("a", 4), vc("b", 4)]),
         {"b1"}, {"a1": "NoNodeFits"}),
    Case("among jobs within guarantee, priority then age across VCs",
         snap([node("n0", 4)], [job("a1", 4, vc="a", at=0), job("b1", 4, vc="b", priority=100, at=1)],
              vcs=[vc("a", 4), vc("b", 4)]),
         {"b1"}, {"a1": "NoNodeFits"}),
    Case("oppo jobs always borrow: others go first",
         snap([node("n0", 4)], [job("o", 4, vc="a", priority=-1, at=0), job("b1", 4, vc="b", at=1)],
              vcs=[vc("a", 4), vc("b", 0)]),
         {"b1"}, {"o": "NoNodeFits"}),
    Case("a VC may borrow idle capacity up to its max",
         snap(nodes(2), [job("a1", 12, vc="a", instances=1, cpu=1)], vcs=[vc("a", 4), vc("b", 12)]),
         set(), {"a1": "NeverFits"}),
    Case("borrowing within max is admitted",
         snap(nodes(2), [job("a1", 8, vc="a", instances=2)], vcs=[vc("a", 4), vc("b", 12)]),
         {"a1"}),
    Case("lending limit keeps part of an idle guarantee",
         snap([node("n0")], [job("b4", 4, vc="b", at=0), job("b2", 2, vc="b", at=1)],
              vcs=[vc("a", 8, lending=2), vc("b", 0)]),
         {"b2"}, {"b4": "LendingLimit"}),
    Case("without a lending limit the whole idle guarantee is lent",
         snap([node("n0")], [job("b4", 4, vc="b", at=0), job("b2", 2, vc="b", at=1)], vcs=[vc("a", 8), vc("b", 0)]),
         {"b4", "b2"}),
    Case("a VC's own jobs are not limited by its lending limit",
         snap([node("n0")], [job("a8", 8, vc="a")], vcs=[vc("a", 8, lending=0)]),
         {"a8"}),
    Case("per-user GPU limit inside a VC",
         snap(nodes(2), [job("ann2", 4, user="ann", at=0), job("bob1", 4, user="bob", at=1)],
              [running("r", "node-0", 2, user="ann")], [vc("default", user_gpu=4)]),
         {"bob1"}, {"ann2": "UserLimit"}),
    Case("per-user limit counts jobs admitted earlier in the pass",
         snap(nodes(2), [job("j1", 3, user="ann", at=0), job("j2", 3, user="ann", at=1)],
              vcs=[vc("default", user_gpu=4)]),
         {"j1"}, {"j2": "UserLimit"}),
    Case("strict FIFO: a waiting job blocks the jobs behind it",
         snap([node("n0", 4)], [job("big", 8, vc="s", at=0), job("small", 1, vc="s", at=1),
                                job("other", 1, vc="f", at=2)],
              [running("r", "n0", 1)], [vc("s", 2, strict_fifo=True), vc("f", 2)]),
         {"other"}, {"big": "NeverFits", "small": "StrictFifo"}),
    Case("strict FIFO keeps order when the head borrows",
         snap([node("n0", 4)], [job("head", 4, vc="s", at=0), job("next", 1, vc="s", at=1)],
              [running("r", "n0", 1, vc="f")], [vc("s", 2, strict_fifo=True), vc("f", 2)]),
         set(), {"head": "NoNodeFits", "next": "StrictFifo"}),
    Case("best-effort FIFO lets the smaller job through",
         snap([node("n0", 4)], [job("head", 4, vc="s", at=0), job("next", 1, vc="s", at=1)],
              [running("r", "n0", 1, vc="f")], [vc("s", 2), vc("f", 2)]),
         {"next"}, {"head": "NoNodeFits"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_quota(case: Case) -> None:
    d = schedule(case.snapshot)
    assert set(admitted(d)) == case.admitted
    assert codes(d) == case.waiting


@pytest.mark.parametrize(("value", "total", "expected"), [
    (12, 100, 12), ("12", 100, 12), ("50%", 8, 4), ("33%", 10, 3), ("100%", 7, 7), ("0%", 7, 0), (2.0, 1, 2),
])
def test_resolve_amount(value: int | float | str, total: int, expected: int) -> None:
    assert resolve_amount(value, total) == expected


@pytest.mark.parametrize("value", ["abc", "-1", -3, "x%", "-5%"])
def test_resolve_amount_refuses(value: int | str) -> None:
    with pytest.raises(InvalidParametersError):
        resolve_amount(value, 10, field="vcs.a.guaranteed.gpu")


def test_resolve_resources_mixes_absolute_and_percent() -> None:
    total = Resources(16, 64, 512_000)
    assert resolve_resources({"gpu": "25%", "cpu": 10}, total) == Resources(4, 10, 0)


@pytest.mark.parametrize(("vcs", "message"), [
    ([VcQuota("a", Resources(6, 0, 0)), VcQuota("b", Resources(3, 0, 0))], "guarantees sum to 9 GPU"),
    ([VcQuota("a", Resources(4, 0, 0), max=Resources(2, 10, 10))], "guaranteed (4 GPU, 0 CPU, 0 MB) exceeds max"),
    ([VcQuota("a"), VcQuota("a")], "listed twice"),
])
def test_validate_guarantees_refuses(vcs: list[VcQuota], message: str) -> None:
    with pytest.raises(InvalidParametersError) as err:
        validate_guarantees(vcs, Resources(8, 32, 1000))
    assert message in err.value.message


def test_validate_guarantees_accepts_exact_fit() -> None:
    validate_guarantees([VcQuota("a", Resources(4, 16, 500)), VcQuota("b", Resources(4, 16, 500))],
                        Resources(8, 32, 1000))


def test_default_holds_the_rest_and_is_added_when_missing() -> None:
    total = Resources(8, 32, 1000)
    got = {q.name: q.guaranteed for q in effective_quotas([VcQuota("a", Resources(6, 10, 100))], total)}
    assert got == {"a": Resources(6, 10, 100), "default": Resources(2, 22, 900)}
    explicit = effective_quotas([VcQuota("default", Resources(1, 1, 1))], total)
    assert explicit[0].guaranteed == Resources(1, 1, 1)


def test_cluster_total_skips_unschedulable_nodes_and_failed_gpus() -> None:
    total = cluster_total([node("a", 8, failed_gpus=2), node("b", 8, schedulable=False), node("c", 4)])
    assert total.gpu == 10


def test_default_vc_jobs_within_the_rest_are_not_borrowing() -> None:
    # default holds 4 of 8 GPUs: its 4-GPU job goes before the older borrowing job of `a`
    s = snap([node("n0", 4), node("n1", 4)], [job("a1", 4, vc="a", at=0), job("d1", 4, at=1)],
             [running("ra", "n1", 4, vc="a")], [vc("a", 4)])
    assert set(admitted(schedule(s))) == {"d1"}


def test_within_a_vc_priority_goes_before_borrowing_status() -> None:
    # p would borrow, s would not; in the same VC p still comes first and preempts the low-priority job
    s = snap([node("n0")], [job("p", 6, priority=100, at=0), job("s", 3, at=1)],
             [running("low", "n0", 4, priority=1)])
    d = schedule(s)
    assert [x.victim for x in d.preemptions] == ["low"]
    assert codes(d) == {"p": "WaitingForPreemption", "s": "NoNodeFits"}
