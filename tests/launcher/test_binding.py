"""Ports and GPUs handed out per node without collisions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pai.domain.jobspec import PortSpec
from pai.domain.node import Node
from pai.domain.resources import Resources
from pai.launcher.binding import BindingError, bind_task, ledgers
from tests.launcher.builders import job, role


def node(gpus: int = 4, ports: tuple[int, int] = (30000, 30010), failed: tuple[int, ...] = ()) -> Node:
    return Node("n1", "10.0.0.1", Resources(gpus, 8, 8000), port_range=ports, failed_gpus=failed)


def test_two_tasks_on_one_node_never_share_ports_or_gpus() -> None:
    led = ledgers([node()], [])["n1"]
    r = role("w", gpu=2, ports=(PortSpec("tb", 2),))
    p1, g1 = bind_task(led, r)
    p2, g2 = bind_task(led, r)
    assert set(p1) == {"http", "ssh", "tb"}
    all1 = {p for ps in p1.values() for p in ps}
    all2 = {p for ps in p2.values() for p in ps}
    assert len(all1) == 4 and len(all2) == 4 and not all1 & all2
    assert g1 == (0, 1) and g2 == (2, 3)


def test_ledger_starts_from_what_active_tasks_hold() -> None:
    j = job(role("w"))
    held = replace(j.tasks[0], node="n1", ports={"http": (30000,), "ssh": (30001,)}, gpus=(0,))
    led = ledgers([node(failed=(1,))], [held])["n1"]
    ports, gpus = bind_task(led, role("w", gpu=1))
    assert ports == {"http": (30002,), "ssh": (30003,)}
    assert gpus == (2,)


def test_exhausted_range_is_an_error() -> None:
    led = ledgers([node(ports=(30000, 30002))], [])["n1"]
    bind_task(led, role("w"))
    with pytest.raises(BindingError):
        bind_task(led, role("w"))


def test_begin_at_is_honoured() -> None:
    led = ledgers([node()], [])["n1"]
    ports, _ = bind_task(led, role("w", ports=(PortSpec("fixed", 2, begin_at=30005),)))
    assert ports["fixed"] == (30005, 30006)
