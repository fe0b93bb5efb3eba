"""The PAI_* and PyTorch environment of a task."""

from __future__ import annotations

from dataclasses import replace

from pai.domain.job import Job
from pai.domain.jobspec import ElasticRange, PortSpec
from pai.domain.states import TaskState
from pai.launcher.env import task_env
from pai.protocol.exitcodes import PlatformExit
from tests.launcher.builders import job, role


def placed() -> Job:
    j = job(role("ps", 1), role("worker", 2, gpu=2, ports=(PortSpec("tb", 2),)), name="dist")
    tasks = []
    for n, t in enumerate(j.tasks):
        ports = {"http": (20000 + 10 * n,), "ssh": (20001 + 10 * n,)}
        if t.role == "worker":
            ports["tb"] = (20002 + 10 * n, 20003 + 10 * n)
        tasks.append(replace(t, node=f"n{n}", address=f"10.0.0.{n + 1}", ports=ports,
                             gpus=(0, 1) if t.role == "worker" else (), attempt_id=f"att{n}"))
    return replace(j, tasks=tuple(tasks))


def test_role_lists_and_host_lists_are_complete() -> None:
    j = placed()
    env = task_env(j, j.task("worker", 1))
    assert env["PAI_JOB_NAME"] == "alice~dist"
    assert env["PAI_USER_NAME"] == "alice"
    assert env["PAI_TASK_ROLE_COUNT"] == "2"
    assert env["PAI_TASK_ROLE_LIST"] == "ps,worker"
    assert env["PAI_TASK_ROLE_worker_HOST_LIST"] == "10.0.0.2:20010,10.0.0.3:20020"
    assert env["PAI_TASK_ROLE_ps_HOST_LIST"] == "10.0.0.1:20000"
    assert env["PAI_TASK_ROLE_TASK_COUNT_worker"] == "2"
    assert env["PAI_HOST_IP_worker_0"] == "10.0.0.2"
    assert env["PAI_PORT_LIST_worker_1_tb"] == "20022,20023"
    assert env["PAI_RESOURCE_worker"] == "2,1,256,64"
    assert env["PAI_MIN_FAILED_TASK_COUNT_worker"] == "1"
    assert env["PAI_MIN_SUCCEEDED_TASK_COUNT_worker"] == "-1"


def test_current_container_variables() -> None:
    j = placed()
    env = task_env(j, j.task("worker", 1))
    assert env["PAI_CURRENT_TASK_ROLE_NAME"] == "worker"
    assert env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"] == "1"
    assert env["PAI_TASK_INDEX"] == "1"
    assert env["PAI_CONTAINER_HOST_IP"] == "10.0.0.3"
    assert env["PAI_CONTAINER_HOST_PORT"] == "20020"
    assert env["PAI_CONTAINER_SSH_PORT"] == "20021"
    assert env["PAI_CONTAINER_HOST_PORT_LIST"] == "http:20020;ssh:20021;tb:20022,20023;"
    assert env["PAI_CONTAINER_ID"] == "att2"
    assert env["PAI_PROXY_PREFIX"] == "/proxy/alice~dist/worker/1"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "0,1"
    assert task_env(j, j.task("ps", 0))["NVIDIA_VISIBLE_DEVICES"] == "none"


def test_pytorch_rendezvous_uses_rank_order() -> None:
    j = placed()
    envs = [task_env(j, t) for t in j.tasks]
    assert {e["MASTER_ADDR"] for e in envs} == {"10.0.0.1"}
    assert {e["MASTER_PORT"] for e in envs} == {"20000"}
    assert {e["WORLD_SIZE"] for e in envs} == {"3"}
    assert sorted(e["RANK"] for e in envs) == ["0", "1", "2"]
    assert task_env(j, j.task("worker", 0))["RANK"] == "1"


def test_job_envs_are_passed_and_platform_names_win() -> None:
    j = placed()
    j = replace(j, spec=replace(j.spec, job_envs={"FOO": "bar", "PAI_JOB_NAME": "spoof"}))
    env = task_env(j, j.task("ps", 0))
    assert env["FOO"] == "bar"
    assert env["PAI_JOB_NAME"] == "alice~dist"


def test_an_elastic_roles_count_and_host_list_are_its_members_now() -> None:
    j = placed()
    worker = replace(j.spec.role("worker"), elastic=ElasticRange(1, 4))
    spec = replace(j.spec, task_roles=(j.spec.role("ps"), worker))
    grown = replace(j.task("worker", 1), index=2, address="10.0.0.9", ports={"http": (20090,)}, attempt_id="att9")
    leaving = replace(j.task("worker", 1), state=TaskState.STOPPING, exit_code=int(PlatformExit.SHRUNK))
    more = replace(grown, index=3, address="10.0.0.8", ports={"http": (20080,)}, attempt_id="att8")
    j = replace(j, spec=spec, tasks=(j.task("ps", 0), j.task("worker", 0), leaving, grown, more))
    env = task_env(j, grown)
    assert env["PAI_TASK_ROLE_TASK_COUNT_worker"] == "3"  # 0, 2 and 3 (1 is leaving; 2 asked first)
    assert env["PAI_TASK_ROLE_worker_HOST_LIST"] == "10.0.0.2:20010,10.0.0.9:20090,10.0.0.8:20080"
    assert env["PAI_TASK_ROLE_TASK_COUNT_ps"] == "1"


def elastic_job() -> Job:
    """worker: 1 to 3, ps fixed; worker 0 on 10.0.0.2 with its rdzv port 20015, worker 1 leaving, worker 2 grown."""
    j = placed()
    worker = replace(j.spec.role("worker"), elastic=ElasticRange(1, 3))
    spec = replace(j.spec, task_roles=(j.spec.role("ps"), worker))
    first = replace(j.task("worker", 0), ports={**j.task("worker", 0).ports, "rdzv": (20015,)})
    leaving = replace(j.task("worker", 1), state=TaskState.STOPPING, exit_code=int(PlatformExit.SHRUNK))
    grown = replace(j.task("worker", 1), index=2, address="10.0.0.9", ports={"http": (20090,), "rdzv": (20095,)},
                    attempt_id="att9")
    return replace(j, spec=spec, tasks=(j.task("ps", 0), first, leaving, grown))


def test_an_elastic_role_gets_torchruns_elastic_launch() -> None:
    j = elastic_job()
    first, grown = task_env(j, j.task("worker", 0)), task_env(j, j.task("worker", 2))
    for env in (first, grown):  # the same for every member, whenever it joined
        assert env["PET_NNODES"] == "1:3"
        assert env["PET_NPROC_PER_NODE"] == "2"  # one worker per GPU
        assert env["PET_RDZV_BACKEND"] == "c10d"
        assert env["PET_RDZV_ENDPOINT"] == "10.0.0.2:20015"  # index 0's rdzv port, never another's
        assert env["PET_RDZV_ID"] == "alice~dist-0-worker"
        assert env["PET_MAX_RESTARTS"] == "100"
        assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"  # each round's rank 0 serves its round's store
    assert (first["PET_LOCAL_ADDR"], grown["PET_LOCAL_ADDR"]) == ("10.0.0.2", "10.0.0.9")  # its own node's
    assert first["PET_RDZV_CONF"] == "is_host=true"
    assert grown["PET_RDZV_CONF"] == "is_host=false"


def test_an_elastic_job_leaves_world_size_and_rank_to_torchrun() -> None:
    j = elastic_job()
    for t in (j.task("worker", 0), j.task("worker", 2), j.task("ps", 0)):
        env = task_env(j, t)
        assert not {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"} & env.keys()
    assert "PET_NNODES" not in task_env(j, j.task("ps", 0))  # a role that never resizes: not torchrun's elastic


def test_a_jobs_envs_may_tune_torchrun() -> None:
    j = elastic_job()
    j = replace(j, spec=replace(j.spec, job_envs={"PET_MAX_RESTARTS": "7", "PET_RDZV_CONF": "last_call_timeout=3"}))
    env = task_env(j, j.task("worker", 2))
    assert env["PET_MAX_RESTARTS"] == "7"
    assert env["PET_RDZV_CONF"] == "last_call_timeout=3,is_host=false"  # who hosts the store is still ours
    j = replace(j, spec=replace(j.spec, job_envs={"PET_RDZV_CONF": "is_host=1"}))
    assert task_env(j, j.task("worker", 2))["PET_RDZV_CONF"] == "is_host=1"  # unless the job says
    assert env["PET_NNODES"] == "1:3"


def test_a_range_of_one_size_is_not_elastic() -> None:
    j = placed()
    worker = replace(j.spec.role("worker"), elastic=ElasticRange(2, 2))
    j = replace(j, spec=replace(j.spec, task_roles=(j.spec.role("ps"), worker)))
    env = task_env(j, j.task("worker", 1))
    assert "PET_NNODES" not in env
    assert env["WORLD_SIZE"] == "3"
