"""What each job and task state means: ended, active, holding its node. One table per rule, every state named."""

from __future__ import annotations

import pytest

from pai.domain.job import Task
from pai.domain.states import JobState, TaskState

J, T = JobState, TaskState


@pytest.mark.parametrize(("state", "terminal", "active"), [
    pytest.param(J.WAITING, False, True, id="WAITING: queued, or requeued with tasks still stopping"),
    pytest.param(J.RUNNING, False, True, id="RUNNING"),
    pytest.param(J.STOPPING, False, True, id="STOPPING"),
    pytest.param(J.STOPPED, True, False, id="STOPPED"),
    pytest.param(J.SUCCEEDED, True, False, id="SUCCEEDED"),
    pytest.param(J.FAILED, True, False, id="FAILED"),
])
def test_a_job_is_active_until_it_ends(state: JobState, terminal: bool, active: bool) -> None:
    assert state.is_terminal() is terminal
    assert state.is_active() is active


def test_every_job_state_is_in_the_table() -> None:
    assert {s for s in J if s.is_active()} == {J.WAITING, J.RUNNING, J.STOPPING}


@pytest.mark.parametrize(("state", "terminal", "holds"), [
    pytest.param(T.WAITING, False, True, id="WAITING: placed, its start on the way"),
    pytest.param(T.RUNNING, False, True, id="RUNNING"),
    pytest.param(T.STOPPING, False, True, id="STOPPING: until its container is gone"),
    pytest.param(T.STOPPED, True, False, id="STOPPED"),
    pytest.param(T.SUCCEEDED, True, False, id="SUCCEEDED"),
    pytest.param(T.FAILED, True, False, id="FAILED"),
])
def test_a_task_state_holds_its_node_until_the_task_ends(state: TaskState, terminal: bool, holds: bool) -> None:
    assert state.is_terminal() is terminal
    assert state.holds_node() is holds


@pytest.mark.parametrize(("node", "state", "holds"), [
    pytest.param("n1", T.WAITING, True, id="placed, waiting for its start"),
    pytest.param("n1", T.RUNNING, True, id="placed, running"),
    pytest.param("n1", T.STOPPING, True, id="placed, stopping"),
    pytest.param("n1", T.SUCCEEDED, False, id="placed, ended"),
    pytest.param(None, T.WAITING, False, id="not placed"),
])
def test_a_task_holds_its_node_when_placed_in_a_holding_state(node: str | None, state: TaskState,
                                                              holds: bool) -> None:
    assert Task("worker", 0, state=state, node=node).holds_node() is holds
