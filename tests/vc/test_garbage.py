"""A pass frees what it built when it returns: no reference cycles left for the collector.

A master's pass builds a State of the whole cluster (pools, ledgers, the victim index). Held in a cycle, all of it
would wait for a full collection, which stops every thread of the master and grows with what is left; the State
held by its own victim index once made the benchmark's full pass 15 % slower."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import replace

import pytest

from pai.vc import Snapshot, schedule
from pai.vc.policy import FairShareStrategy, FairSharing, NodeLendingLimit
from tests.vc.vc_builders import job, nodes, running, snap, vc


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def busy(**config: object) -> Snapshot:
    """Preemption, a whole-node job, non-gang and hinted waiting jobs, two borrowing VCs."""
    pending = [job("a1", 8, vc="a", priority=100), job("a2", 4, vc="a", at=1.0), job("b1", 8, vc="b", at=2.0),
               replace(job("w", 8, instances=2, vc="b", at=3.0), whole_nodes=True),
               replace(job("ng", 2, instances=3, vc="a", at=4.0), gang=False)]
    run = [running("r1", "node-0", 6, vc="b", started=1.0), running("r2", "node-1", 7, vc="b", started=2.0),
           replace(running("r3", ["node-2", "node-3"], 8, vc="b", started=3.0), whole_nodes=True)]
    return snap(nodes(4), pending, run, [vc("a", 16), vc("b", 16)], **config)


@pytest.mark.parametrize("config", [
    pytest.param({}, id="defaults"),
    pytest.param({"fair_sharing": FairSharing(True, FairShareStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE),
                  "node_lending_limit": NodeLendingLimit(gpu=6), "whole_nodes_for_multi_node_gpu": True},
                 id="every-rule-on"),
])
def test_a_pass_leaves_no_cycles(collector_off: None, config: dict[str, object]) -> None:
    s = busy(**config)
    d = schedule(s)
    assert d.admissions or d.preemptions or d.waiting  # the pass did work
    assert gc.collect() == 0
