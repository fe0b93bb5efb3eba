"""Elastic jobs through the launcher on a real database (issue 31): admitted at the minimum, grown when a node's
capacity frees, shrunk when a job of higher priority arrives; the history says why each time."""

from __future__ import annotations

from dataclasses import replace

from pai.domain.jobspec import ElasticRange, JobSpec, TaskRoleSpec
from pai.domain.resources import Resources
from pai.domain.states import JobState, TaskState
from pai.launcher import cluster
from pai.launcher.service import Launcher, LauncherConfig
from pai.protocol import ContainerReport, ContainerStatus
from pai.protocol.exitcodes import PlatformExit
from pai.protocol.messages import HeartbeatRequest, NodeInfo, RegisterRequest, StartTask, StopTask
from pai.store import history, jobs
from pai.store.db import Database
from tests.launcher.builders import Clock, user


def _spec(name: str, instances: int, *, gpu: int = 1, priority: int = 10, elastic: ElasticRange | None = None
          ) -> JobSpec:
    role = TaskRoleSpec("w", instances, "sleep 600", Resources(gpu, 1, 256), elastic=elastic)
    return JobSpec(name=name, task_roles=(role,), image="busybox", priority=priority)


def _beat(launcher: Launcher, reports: tuple[ContainerReport, ...] = ()) -> tuple[list[StartTask], list[StopTask]]:
    reply = launcher.heartbeat(HeartbeatRequest("n1", reports))
    return ([c for c in reply.commands if isinstance(c, StartTask)],
            [c for c in reply.commands if isinstance(c, StopTask)])


def _running(start: StartTask) -> ContainerReport:
    return ContainerReport(start.attempt_id, start.job_key, start.role, start.index, ContainerStatus.RUNNING,
                           started_at=1000.0)


def _exited(job_key: str, attempt: str, index: int, code: int) -> ContainerReport:
    return ContainerReport(attempt, job_key, "w", index, ContainerStatus.EXITED, exit_code=code, finished_at=1000.0)


def _events(db: Database, key: str) -> list[tuple[str, str]]:
    with db.session() as s:
        job = jobs.get_job(s, key)
        return [(e.kind, e.message) for e in history.list_events(s, job.id) if e.kind == "resized"]


def test_an_elastic_job_starts_at_its_minimum_grows_into_freed_capacity_and_shrinks_for_a_higher_priority(
        db: Database) -> None:
    clock = Clock(1000.0)
    launcher = Launcher(db, LauncherConfig(), clock=clock)
    launcher.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(4, 16, 65536))))
    launcher.submit(user("bob"), _spec("other", 1, gpu=2), "{}")
    launcher.schedule_pass()
    (other,), _ = _beat(launcher)
    launcher.submit(user("alice"), _spec("e", 4, elastic=ElasticRange(2, 4)), "{}")
    decision = launcher.schedule_pass()
    assert [(a.job, len(a.placements)) for a in decision.admissions] == [("alice~e", 2)]  # 4 do not fit: its minimum
    starts, _ = _beat(launcher, (_running(other),))
    assert sorted(s.index for s in starts) == [0, 1]
    running = (*(_running(s) for s in starts), _running(other))
    _beat(launcher, running)

    # bob's job ends: the next full pass grows alice's into the 2 GPUs it leaves
    clock.now = 1100.0
    _beat(launcher, (*running[:2], _exited("bob~other", other.attempt_id, 0, 0)))
    launcher.take_touched()
    decision = launcher.schedule_pass(full=True)
    assert launcher.take_touched() == {"n1"}  # its agent is poked to start the new tasks
    (grow,) = decision.resizes
    assert (grow.job, grow.size_from, grow.size_to) == ("alice~e", 2, 4)
    new, _ = _beat(launcher, running[:2])
    assert sorted(s.index for s in new) == [2, 3]
    peers = {s.index: s for s in starts}
    assert all(s.env["PAI_JOB_NAME"] == peers[0].env["PAI_JOB_NAME"] for s in new)
    assert {g for s in (*starts, *new) for g in s.gpus} == {0, 1, 2, 3}  # bound as an admission's tasks
    running = (*running[:2], *(_running(s) for s in new))
    _beat(launcher, running)
    with db.session() as s:
        job = jobs.get_job(s, "alice~e")
    assert [t.index for t in job.tasks] == [0, 1, 2, 3] and job.last_resized_at == 1100.0
    assert _events(db, "alice~e") == [("resized", "grew to 4: 2 GPUs idle in VC `default`")]

    # a job of higher priority needs 2 GPUs: alice's gives back its two highest workers, not the whole job
    clock.now = 1110.0
    launcher.submit(user("carol"), _spec("urgent", 2, priority=100), "{}")
    decision = launcher.schedule_pass()
    (shrink,) = decision.resizes
    assert (shrink.size_to, shrink.removed, shrink.preemptor) == (2, (3, 2), "carol~urgent")
    assert not decision.preemptions and not decision.admissions
    _, stops = _beat(launcher, running)
    assert sorted(s.attempt_id for s in stops) == sorted(s.attempt_id for s in new)
    clock.now = 1115.0
    _beat(launcher, (*running[:2], *(_exited("alice~e", s.attempt_id, s.index, 143) for s in new)))
    decision = launcher.schedule_pass()
    assert [a.job for a in decision.admissions] == ["carol~urgent"]
    with db.session() as s:
        job = jobs.get_job(s, "alice~e")
        ended = {a.index: (a.state, a.exit_code) for a in history.list_attempts(s, job.id) if a.index >= 2}
    assert (job.state, job.retries, job.platform_retries) == (JobState.RUNNING, 0, 0)
    assert [(t.index, t.state) for t in job.tasks] == [(0, TaskState.RUNNING), (1, TaskState.RUNNING)]
    assert ended == {2: (TaskState.STOPPED, int(PlatformExit.SHRUNK)), 3: (TaskState.STOPPED, int(PlatformExit.SHRUNK))}
    assert _events(db, "alice~e")[1:] == [
        ("resized", "shrank to 2: carol~urgent (priority 100) takes 2 GPUs in its VC")]
    assert launcher.metrics.resizes.labels("idle-capacity", "default")._value.get() == 1
    assert launcher.metrics.resizes.labels("priority", "default")._value.get() == 1


def test_a_borrowing_elastic_job_shrinks_when_a_vc_reclaims_its_guarantee(db: Database) -> None:
    clock = Clock(1000.0)
    with db.session() as s:
        cluster.apply_file(s, {"virtualClusters": [
            {"name": "default"}, {"name": "prod", "guaranteed": {"gpu": 2, "cpu": 8, "memoryMB": 32768}}]}, 1.0)
    launcher = Launcher(db, LauncherConfig(), clock=clock)
    launcher.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(4, 16, 65536))))
    launcher.submit(user("alice"), _spec("e", 4, elastic=ElasticRange(1, 4)), "{}")
    assert [len(a.placements) for a in launcher.schedule_pass().admissions] == [4]  # its asked size fits: borrowed
    starts, _ = _beat(launcher)
    running = tuple(_running(s) for s in starts)
    _beat(launcher, running)

    clock.now = 1010.0
    launcher.submit(user("bob", "prod"), replace(_spec("mine", 2), virtual_cluster="prod"), "{}")
    decision = launcher.schedule_pass()
    assert [(z.job, z.size_to, z.removed, z.cause.value) for z in decision.resizes] == [
        ("alice~e", 2, (3, 2), "reclaim")]
    assert decision.waiting["bob~mine"].message == "will start when 2 tasks of elastic jobs stop"
    _, stops = _beat(launcher, running)
    assert sorted(s.attempt_id for s in stops) == sorted(r.attempt_id for r in running[2:])
    assert launcher.schedule_pass(full=True).resizes == ()  # no second shrink for the tasks already leaving
    _beat(launcher, (*running[:2], *(_exited("alice~e", r.attempt_id, r.index, 137) for r in running[2:])))
    assert [a.job for a in launcher.schedule_pass().admissions] == ["bob~mine"]
    with db.session() as s:
        job = jobs.get_job(s, "alice~e")
    assert (job.state, [t.index for t in job.tasks], job.retries) == (JobState.RUNNING, [0, 1], 0)
    assert _events(db, "alice~e") == [("resized", "shrank to 2: VC `prod` reclaims 2 GPUs")]


def test_every_member_hears_of_a_resize_and_a_new_member_starts_with_torchruns_rendezvous(db: Database) -> None:
    clock = Clock(1000.0)
    launcher = Launcher(db, LauncherConfig(), clock=clock)
    launcher.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(1, 16, 65536))))
    launcher.submit(user("alice"), _spec("e", 1, elastic=ElasticRange(1, 2)), "{}")
    launcher.schedule_pass()
    (first,), _ = _beat(launcher)
    assert first.env["PET_NNODES"] == "1:2" and first.env["PET_RDZV_CONF"] == "is_host=true"
    rdzv = first.ports["rdzv"][0]
    assert first.env["PET_RDZV_ENDPOINT"] == f"127.0.0.5:{rdzv}"
    assert first.members is not None and [m.index for m in first.members.roles["w"]] == [0]
    _beat(launcher, (_running(first),))
    _beat(launcher, (_running(first),))  # needed nothing: its node's quiet view is learnt
    assert launcher.heartbeat(HeartbeatRequest("n1", (_running(first),))).members == ()  # quiet: nothing new

    # a second node joins: the next full pass grows the job onto it
    clock.now = 1100.0
    launcher.register(RegisterRequest(NodeInfo("n2", "127.0.0.6", Resources(1, 16, 65536))))
    launcher.take_touched()
    (grow,) = launcher.schedule_pass(full=True).resizes
    assert grow.size_to == 2
    assert launcher.take_touched() == {"n1", "n2"}  # n1's task is not changed, but its membership is: poked too
    (second,) = [c for c in launcher.heartbeat(HeartbeatRequest("n2")).commands if isinstance(c, StartTask)]
    assert second.env["PET_RDZV_ENDPOINT"] == f"127.0.0.5:{rdzv}" and second.env["PET_RDZV_CONF"] == "is_host=false"
    assert "WORLD_SIZE" not in second.env
    reply = launcher.heartbeat(HeartbeatRequest("n1", (_running(first),)))
    (members,) = reply.members
    assert [(m.index, m.host) for m in members.roles["w"]] == [(0, "127.0.0.5"), (1, "127.0.0.6")]
