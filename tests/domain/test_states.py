"""What each job and task state means: ended, active (a job), holding its node (a task)."""

from __future__ import annotations

import pytest

from pai.domain.job import Task
from pai.domain.states import JobState, TaskState

J, T = JobState, TaskState


@pytest.mark.parametrize(("name", "terminal", "job_active", "task_holds"), [
    pytest.param("WAITING", False, True, True, id="WAITING: a job queued (or requeued, tasks still stopping); "
                                                  "a task placed, its start on the way"),
    pytest.param("RUNNING", False, True, True, id="RUNNING"),
    pytest.param("STOPPING", False, True, True, id="STOPPING: until every container is gone"),
    pytest.param("STOPPED", True, False, False, id="STOPPED"),
    pytest.param("SUCCEEDED", True, False, False, id="SUCCEEDED"),
    pytest.param("FAILED", True, False, False, id="FAILED"),
])
def test_what_a_state_means(name: str, terminal: bool, job_active: bool, task_holds: bool) -> None:
    job, task = JobState(name), TaskState(name)
    assert (job.is_terminal(), job.is_active()) == (terminal, job_active)
    assert (task.is_terminal(), task.holds_node()) == (terminal, task_holds)


def test_the_table_names_every_state() -> None:
    assert {s.value for s in J} == {s.value for s in T} == {"WAITING", "RUNNING", "STOPPING", "STOPPED", "SUCCEEDED",
                                                             "FAILED"}


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
