"""The launcher's transactions on a real database: node timeouts and the master's own start."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pai.domain.errors import ForbiddenUserError, InvalidProtocolError, NoJobError
from pai.domain.jobspec import JobSpec, SpecWarning, TaskRoleSpec
from pai.domain.node import NodeState
from pai.domain.resources import Resources
from pai.launcher import cluster
from pai.launcher.service import Launcher, LauncherConfig
from pai.protocol import ContainerReport, ContainerStatus
from pai.protocol.messages import HeartbeatRequest, NodeInfo, RegisterRequest, StartTask
from pai.store import history, jobs, nodes
from pai.store.db import Database
from pai.store.records import User
from tests.launcher.builders import Clock, user
from tests.store.secretjobs import PASSWORD, TOKEN, secret_job


def register(launcher: Launcher, name: str) -> None:
    launcher.register(RegisterRequest(NodeInfo(name, "127.0.0.5", Resources(0, 2, 1024))))


def state(db: Database, name: str) -> NodeState:
    with db.session() as s:
        return nodes.get_node(s, name).state


def test_a_silent_node_is_lost_after_the_timeout_and_back_on_heartbeat(db: Database) -> None:
    clock = Clock(1000.0)
    launcher = Launcher(db, LauncherConfig(node_timeout_seconds=30), clock=clock)
    register(launcher, "n1")
    clock.now = 1029.0
    assert launcher.check_nodes() == []
    clock.now = 1031.0
    assert launcher.check_nodes() == ["n1"]
    assert state(db, "n1") is NodeState.LOST
    launcher.heartbeat(HeartbeatRequest("n1"))
    assert state(db, "n1") is NodeState.READY


def test_a_restarted_master_gives_nodes_a_full_timeout_before_declaring_them_lost(db: Database) -> None:
    clock = Clock(1000.0)
    register(Launcher(db, LauncherConfig(node_timeout_seconds=30), clock=clock), "n1")
    clock.now = 5000.0  # the master was down for over an hour
    restarted = Launcher(db, LauncherConfig(node_timeout_seconds=30), clock=clock)
    assert restarted.check_nodes() == []
    clock.now = 5031.0
    assert restarted.check_nodes() == ["n1"]


def test_a_cordoned_node_that_was_lost_comes_back_cordoned(db: Database) -> None:
    clock = Clock(1000.0)
    launcher = Launcher(db, LauncherConfig(node_timeout_seconds=30), clock=clock)
    register(launcher, "n1")
    with db.session() as s:
        nodes.set_node_state(s, "n1", NodeState.CORDONED)
    clock.now = 1031.0
    assert launcher.check_nodes() == ["n1"]
    assert state(db, "n1") is NodeState.LOST
    launcher.heartbeat(HeartbeatRequest("n1"))
    assert state(db, "n1") is NodeState.CORDONED
    clock.now = 1062.0
    launcher.check_nodes()
    register(launcher, "n1")  # an agent restart re-registers: still cordoned
    assert state(db, "n1") is NodeState.CORDONED
    with db.session() as s:
        nodes.set_node_state(s, "n1", NodeState.READY)
    clock.now = 1093.0
    launcher.check_nodes()
    launcher.heartbeat(HeartbeatRequest("n1"))
    assert state(db, "n1") is NodeState.READY


def _running_job(launcher: Launcher, clock: Clock) -> str:
    """A 1-task job submitted, placed on n1 and reported running; its attempt id."""
    spec = JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "sleep 600", Resources(0, 1, 256)),), image="busybox")
    launcher.submit(user("alice"), spec, "{}")
    launcher.schedule_pass()
    reply = launcher.heartbeat(HeartbeatRequest("n1"))
    (start,) = reply.commands
    assert isinstance(start, StartTask)
    launcher.heartbeat(HeartbeatRequest("n1", (_running(start.attempt_id),)))
    return start.attempt_id


def _running(attempt: str) -> ContainerReport:
    return ContainerReport(attempt, "alice~j", "w", 0, ContainerStatus.RUNNING, started_at=1000.0)


def _task(db: Database) -> tuple[str, str | None, str]:
    """The task's state and attempt, and how its first attempt ended."""
    with db.session() as s:
        job = jobs.get_job(s, "alice~j")
        first = history.list_attempts(s, job.id)[0]
        (t,) = job.tasks
        return t.state.value, t.attempt_id, first.exit_reason or ""


def test_a_lost_nodes_tasks_are_requeued_only_after_the_fencing_window(db: Database) -> None:
    clock = Clock(1000.0)
    config = LauncherConfig(node_timeout_seconds=30, fence_grace_seconds=5, heartbeat_seconds=1)
    launcher = Launcher(db, config, clock=clock)
    register(launcher, "n1")
    attempt = _running_job(launcher, clock)
    reply = launcher.heartbeat(HeartbeatRequest("n1", (_running(attempt),)))
    assert (reply.node_timeout_seconds, reply.fence_grace_seconds) == (30, 5)  # what the agent fences by
    assert config.fence_window_seconds == 5 + 2 + 2

    clock.now = 1031.0
    assert launcher.check_nodes() == ["n1"]
    assert state(db, "n1") is NodeState.LOST
    assert _task(db)[:2] == ("RUNNING", attempt)  # its agent may still be stopping it: not requeued yet
    clock.now = 1038.9
    launcher.check_nodes()
    assert _task(db)[:2] == ("RUNNING", attempt)
    clock.now = 1039.1
    launcher.check_nodes()
    task_state, new_attempt, diagnostics = _task(db)
    assert task_state == "WAITING" and new_attempt != attempt
    assert "node n1 lost" in diagnostics and "fencing window" in diagnostics


def test_a_node_back_inside_the_window_keeps_its_tasks(db: Database) -> None:
    clock = Clock(1000.0)
    launcher = Launcher(db, LauncherConfig(node_timeout_seconds=30, fence_grace_seconds=5), clock=clock)
    register(launcher, "n1")
    attempt = _running_job(launcher, clock)
    clock.now = 1032.0
    assert launcher.check_nodes() == ["n1"]
    launcher.heartbeat(HeartbeatRequest("n1", (_running(attempt),)))
    assert state(db, "n1") is NodeState.READY
    clock.now = 1045.0
    assert launcher.check_nodes() == []
    assert _task(db)[:2] == ("RUNNING", attempt)


@pytest.mark.parametrize(("code_dir", "webhdfs"), [
    pytest.param("hdfs://nn.example:9000/code", "http://web.example:50070", id="namenode-listed"),
    pytest.param("hdfs://other:9000/code", "", id="namenode-not-listed: the agent's default rule"),
    pytest.param("/shared/code", "", id="not-on-hdfs"),
])
def test_the_start_command_carries_the_configured_webhdfs_address(db: Database, code_dir: str, webhdfs: str) -> None:
    with db.session() as s:
        cluster.apply_file(s, {"hdfs": {"webhdfs": {"nn.example:9000": "http://web.example:50070"}},
                               "localPaths": [{"path": "/shared"}]}, 1.0)
    clock = Clock(1000.0)
    launcher = Launcher(db, LauncherConfig(), clock=clock)
    register(launcher, "n1")
    spec = JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "true", Resources(0, 1, 256)),), image="busybox",
                   code_dir=code_dir)
    launcher.submit(user("alice"), spec, "{}")
    launcher.schedule_pass()
    (start,) = launcher.heartbeat(HeartbeatRequest("n1")).commands
    assert isinstance(start, StartTask) and (start.code_dir, start.webhdfs) == (code_dir, webhdfs)


def test_the_start_command_carries_the_jobs_secrets(db: Database) -> None:
    clock = Clock(1000.0)
    launcher = Launcher(db, LauncherConfig(), clock=clock)
    register(launcher, "n1")
    spec = JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "true", Resources(0, 1, 256)),), image="busybox",
                   secrets={"token": "t0k", "nested": {"a": [1]}})
    launcher.submit(user("alice"), spec, "{}")
    launcher.schedule_pass()
    (start,) = launcher.heartbeat(HeartbeatRequest("n1")).commands
    assert isinstance(start, StartTask) and start.secrets == {"token": "t0k", "nested": {"a": [1]}}


def test_a_start_command_opens_what_the_store_sealed(db: Database) -> None:
    """The job's secrets, its command rendered from them and its registry login are sealed in the store (masked in
    the row) and reach the agent in clear."""
    launcher = Launcher(db, LauncherConfig(), clock=Clock(1000.0))
    register(launcher, "n1")
    secret, body = secret_job()
    launcher.submit(user("alice"), replace(secret.spec, task_roles=(replace(secret.spec.task_roles[0], instances=1),)),
                    body)
    with db.session() as s:
        assert jobs.get_job(s, "alice~secret").spec.sealed is not None
    launcher.schedule_pass()
    (start,) = launcher.heartbeat(HeartbeatRequest("n1")).commands
    assert isinstance(start, StartTask) and start.secrets == {"token": TOKEN, "pw": PASSWORD}
    assert start.command.startswith(f"echo {TOKEN}\n")
    assert start.registry_auth is not None and (start.registry_auth.username, start.registry_auth.password) == (
        "bot", PASSWORD)


PATHS = [
    # (hdfs setting, codeDir as parsed, codeDir stored)
    pytest.param({"defaultFs": "hdfs://nn:9000/"}, "$PAI_DEFAULT_FS_URI/$PAI_USERNAME/code",
                 "hdfs://nn:9000/alice/code", id="default fs and user name"),
    pytest.param({}, "/shared/$PAI_USER_NAME/code", "/shared/alice/code", id="user name without a default fs"),
    pytest.param({}, "/shared/$PAI_USER_NAMES/code", "/shared/$PAI_USER_NAMES/code", id="another variable left"),
]


@pytest.mark.parametrize(("hdfs", "code_dir", "stored"), PATHS)
def test_submit_replaces_openpais_path_variables(db: Database, hdfs: dict[str, str], code_dir: str,
                                                 stored: str) -> None:
    with db.session() as s:
        cluster.apply_file(s, {"hdfs": hdfs, "localPaths": [{"path": "/shared"}]}, 1.0)
    spec = JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "true", Resources(0, 1, 256)),), image="busybox",
                   protocol_version=1, code_dir=code_dir, data_dir="/shared/$PAI_USERNAME/data")
    job = Launcher(db, LauncherConfig(), clock=Clock(1000.0)).submit(user("alice"), spec, "{}")
    with db.session() as s:
        saved = jobs.get_job(s, job.key).spec
    assert (saved.code_dir, saved.data_dir) == (stored, "/shared/alice/data")


def test_default_fs_without_a_configured_one_is_refused_and_nothing_stored(db: Database) -> None:
    spec = JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "true", Resources(0, 1, 256)),), image="busybox",
                   protocol_version=1, output_dir="$PAI_DEFAULT_FS_URI/out")
    with pytest.raises(InvalidProtocolError, match=r"hdfs\.defaultFs") as caught:
        Launcher(db, LauncherConfig(), clock=Clock(1000.0)).submit(user("alice"), spec, "{}")
    assert caught.value.field == "outputDir"
    with db.session() as s, pytest.raises(NoJobError):
        jobs.get_job(s, "alice~j")


def test_warnings_of_the_spec_are_events_of_the_job(db: Database) -> None:
    spec = JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "true", Resources(0, 1, 256)),), image="busybox")
    warning = SpecWarning("authFile", "not used")
    job = Launcher(db, LauncherConfig(), clock=Clock(1000.0)).submit(user("alice"), spec, "{}", [warning])
    with db.session() as s:
        events = [(e.kind, e.message, e.details) for e in history.list_events(s, job.id)]
    assert events == [("submitted", "submitted by alice to VC default", {}),
                      ("warning", "authFile: not used", {"field": "authFile", "message": "not used"})]


def _gpu_spec(name: str, gpu: int, *, priority: int = 10, preemptible: bool = True) -> JobSpec:
    return JobSpec(name=name, task_roles=(TaskRoleSpec("w", 1, "sleep 600", Resources(gpu, 1, 256)),),
                   image="busybox", priority=priority, preemptible=preemptible)


def test_a_stored_non_preemptible_job_is_not_preempted_and_the_waiting_job_says_why(db: Database) -> None:
    clock = Clock(1000.0)
    with db.session() as s:
        cluster.apply_file(s, {"nonPreemptible": {"users": ["alice"]}}, 1.0)
    launcher = Launcher(db, LauncherConfig(), clock=clock)
    launcher.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(8, 16, 65536))))
    launcher.submit(user("alice"), _gpu_spec("svc", 1, preemptible=False), "{}")
    assert [a.job for a in launcher.schedule_pass().admissions] == ["alice~svc"]
    launcher.submit(user("bob"), _gpu_spec("big", 8, priority=100), "{}")
    launcher.submit(user("bob"), _gpu_spec("small", 4), "{}")
    clock.now = 1001.0
    decision = launcher.schedule_pass(full=True)
    assert decision.preemptions == ()
    assert [a.job for a in decision.admissions] == ["bob~small"]
    assert decision.waiting["bob~big"].code == "HeldByNonPreemptible"
    assert "alice~svc on n1" in decision.waiting["bob~big"].message


def test_a_non_preemptible_job_without_the_right_is_refused_and_nothing_stored(db: Database) -> None:
    launcher = Launcher(db, LauncherConfig(), clock=Clock(1000.0))
    with pytest.raises(ForbiddenUserError) as caught:
        launcher.submit(user("bob"), _gpu_spec("svc", 1, preemptible=False), "{}")
    assert caught.value.field == "extras.preemptible"
    assert caught.value.message == ("extras.preemptible: user bob may not submit a non-preemptible job of priority "
                                    "class 'test' (the cluster's nonPreemptible allows admins)")
    with db.session() as s, pytest.raises(NoJobError):
        jobs.get_job(s, "bob~svc")


def test_the_right_may_come_with_the_priority_class_and_goes_with_it(db: Database) -> None:
    with db.session() as s:
        cluster.apply_file(s, {"nonPreemptible": {"priorityClasses": ["prod"]}}, 1.0)
    launcher = Launcher(db, LauncherConfig(), clock=Clock(1000.0))
    spec = replace(_gpu_spec("svc", 1, priority=100, preemptible=False), priority_class="prod")
    job = launcher.submit(user("bob"), spec, "{}")
    with pytest.raises(ForbiddenUserError):
        launcher.set_priority(job.key, "test", user("bob"))
    assert launcher.set_priority(job.key, "test", User("root", admin=True)).spec.priority_class == "test"


def test_every_reply_carries_the_epoch_the_launcher_acts_for_and_terms_only_grow(db: Database) -> None:
    launcher = Launcher(db)
    assert launcher.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(0, 2, 1024)))).epoch == 0
    launcher.lead(3)
    assert launcher.epoch == 3
    assert launcher.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(0, 2, 1024)))).epoch == 3
    first, quiet = launcher.heartbeat(HeartbeatRequest("n1")), launcher.heartbeat(HeartbeatRequest("n1"))
    assert (first.epoch, quiet.epoch) == (3, 3)  # the second is answered from memory (launcher/heartbeats.py)
    with pytest.raises(ValueError, match="epoch: 2 is lower than the epoch this launcher acts for \\(3\\)"):
        launcher.lead(2)
    assert launcher.epoch == 3
