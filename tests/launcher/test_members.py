"""An elastic job's membership as the master sends it (pai.launcher.members, pai.protocol.members)."""

from __future__ import annotations

from dataclasses import replace

from pai.domain.jobspec import PortSpec
from pai.domain.states import TaskState
from pai.launcher.members import members_of
from pai.protocol.members import JobMembers, Member
from pai.protocol.messages import MasterReply, StartTask
from tests.launcher.builders import job, role
from tests.launcher.test_env import elastic_job


def test_members_are_the_placed_tasks_not_leaving_in_index_order() -> None:
    m = members_of(elastic_job())
    assert m is not None
    assert m.job_key == "alice~dist"
    assert m.document() == {
        "ps": [{"index": 0, "host": "10.0.0.1", "ports": {"http": [20000], "ssh": [20001]}}],
        "worker": [
            {"index": 0, "host": "10.0.0.2", "ports": {"http": [20010], "ssh": [20011], "tb": [20012, 20013],
                                                        "rdzv": [20015]}},
            {"index": 2, "host": "10.0.0.9", "ports": {"http": [20090], "rdzv": [20095]}},  # 1 is leaving
        ],
    }


def test_ended_and_unplaced_tasks_are_not_members() -> None:
    j = elastic_job()
    ended = replace(j.task("worker", 2), state=TaskState.FAILED)
    waiting = replace(j.task("worker", 2), index=3, address=None, node=None, ports={})
    j = replace(j, tasks=(*[t for t in j.tasks if t.index != 2 or t.role != "worker"], ended, waiting))
    m = members_of(j)
    assert m is not None
    assert [x.index for x in m.roles["worker"]] == [0]


def test_a_job_that_never_resizes_has_no_membership() -> None:
    assert members_of(job(role("worker", 2, ports=(PortSpec("tb"),)))) is None


def test_membership_round_trips_in_a_reply_and_a_start() -> None:
    m = JobMembers("alice~dist", {"worker": (Member(0, "10.0.0.2", {"rdzv": (20015,)}), Member(2, "10.0.0.9"))})
    reply = MasterReply(members=(m,))
    assert MasterReply.from_dict(reply.to_dict()).members == (m,)
    assert MasterReply.from_dict({"version": 1}).members == ()  # an older master's: nothing changes
    start = StartTask("a1", "alice~dist", "worker", 2, "", "true", {}, role("w").resources, members=m)
    assert StartTask.from_dict(start.to_dict()).members == m
    assert StartTask.from_dict(replace(start, members=None).to_dict()).members is None
