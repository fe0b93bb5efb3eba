"""The environment of every task container: OpenPAI's PAI_* variables and PyTorch's rendezvous variables.

Built in one place from the job and the placements of all its tasks, so every host list is complete
before any task starts. A non-gang job (``gangAllocation: false``) starts tasks before its peers are placed: as
OpenPAI's runtime does then, a peer without a node yet gets no ``PAI_HOST_IP_<role>_<i>`` nor port variables, and
is left out of its role's host list (the task sees the peers placed when it starts).

An elastic job (issue 31) gets torchrun's elastic launch instead of the fixed rendezvous (``PET_*`` for the tasks of a
role that may resize, none of MASTER_*/WORLD_SIZE/RANK): torchrun sets those for its workers as the size stands.
"""

from __future__ import annotations

from pai.domain.job import Job, Task
from pai.domain.jobspec import RDZV_PORT_LABEL, TaskRoleSpec
from pai.launcher.lifecycle import shrinking

# A role may declare a port with this label for torch.distributed's store; otherwise rank 0's http port is used.
TORCH_PORT_LABEL = "master"
# How often torchrun restarts its workers (each change of the job's size is one restart) before it gives up.
ELASTIC_MAX_RESTARTS = 100


def _ports_csv(task: Task, label: str) -> str:
    return ",".join(str(p) for p in task.ports.get(label, ()))


def _first_port(task: Task, label: str) -> str:
    ports = task.ports.get(label, ())
    return str(ports[0]) if ports else ""


def _port_list(task: Task) -> str:
    """``http:p;ssh:p;label:p1,p2;`` as OpenPAI writes PAI_CONTAINER_HOST_PORT_LIST."""
    return "".join(f"{label}:{','.join(str(p) for p in ports)};" for label, ports in task.ports.items())


def _ordered(job: Job) -> list[Task]:
    """All tasks in rank order: roles in spec order, then index."""
    order = {r.name: i for i, r in enumerate(job.spec.task_roles)}
    return sorted(job.tasks, key=lambda t: (order[t.role], t.index))


def _count(v: int | None) -> str:
    return "-1" if v is None else str(v)


def task_env(job: Job, current: Task, *, trial_token: str = "") -> dict[str, str]:
    """Every variable for ``current``; every task of a gang has an address and ports (a non-gang job's peers may
    not yet). ``trial_token``: a trial's job's token (unsealed), as PAI_TRIAL_TOKEN (its PAI_TRIAL_ID and
    PAI_TRIAL_HPARAMS are in the job's envs)."""
    spec = job.spec
    tasks = _ordered(job)
    env: dict[str, str] = {str(k): str(v) for k, v in spec.job_envs.items()}
    env.update(
        {
            "PAI_JOB_NAME": job.key,
            "PAI_USER_NAME": job.user,
            "PAI_VIRTUAL_CLUSTER": spec.virtual_cluster,
            "PAI_TASK_ROLE_COUNT": str(len(spec.task_roles)),
            "PAI_TASK_ROLE_LIST": ",".join(r.name for r in spec.task_roles),
            "PAI_CURRENT_TASK_ROLE_NAME": current.role,
            "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(current.index),
            "PAI_TASK_INDEX": str(current.index),
            "PAI_JOB_RETRY_COUNT": str(job.retries),
            "PAI_CODE_DIR": spec.code_dir,
            "PAI_DATA_DIR": spec.data_dir,
            "PAI_OUTPUT_DIR": spec.output_dir,
        }
    )
    for role in spec.task_roles:
        mine = [t for t in tasks if t.role == role.name and not shrinking(t)]  # an elastic role's members now
        r = role.name
        elastic = role.elastic is not None and role.elastic.resizable
        env[f"PAI_TASK_ROLE_TASK_COUNT_{r}"] = str(len(mine) if elastic else role.instances)
        env[f"PAI_TASK_ROLE_{r}_HOST_LIST"] = ",".join(f"{t.address}:{_first_port(t, 'http')}" for t in mine
                                                      if t.address is not None)
        env[f"PAI_RESOURCE_{r}"] = (
            f"{role.resources.gpu},{role.resources.cpu},{role.resources.memory_mb},{role.shm_mb}"
        )
        env[f"PAI_MIN_FAILED_TASK_COUNT_{r}"] = _count(role.min_failed)
        env[f"PAI_MIN_SUCCEEDED_TASK_COUNT_{r}"] = _count(role.min_succeeded)
        for t in mine:
            if t.address is None:
                continue  # not placed yet (non-gang job)
            env[f"PAI_HOST_IP_{r}_{t.index}"] = t.address
            for label in t.ports:
                env[f"PAI_PORT_LIST_{r}_{t.index}_{label}"] = _ports_csv(t, label)
    env.update(
        {
            "PAI_CONTAINER_HOST_IP": current.address or "",
            "PAI_CONTAINER_HOST_PORT": _first_port(current, "http"),
            "PAI_CONTAINER_SSH_PORT": _first_port(current, "ssh"),
            "PAI_CONTAINER_HOST_PORT_LIST": _port_list(current),
            "PAI_CONTAINER_ID": current.attempt_id or "",
            # the master's proxy to this task's ports (pai.rest_server.proxy): append /<label>/ for one of them
            "PAI_PROXY_PREFIX": f"/proxy/{job.key}/{current.role}/{current.index}",
            "NVIDIA_VISIBLE_DEVICES": ",".join(str(g) for g in current.gpus) if current.gpus else "none",
        }
    )
    role = spec.role(current.role)
    if spec.is_elastic:  # torchrun sets MASTER_*, WORLD_SIZE and RANK for its workers, as the job's size stands
        if role.elastic is not None and role.elastic.resizable:
            env.update({k: v for k, v in _elastic_env(job, role).items() if k not in spec.job_envs})
            if "PET_LOCAL_ADDR" not in spec.job_envs:  # the round's rank 0 publishes it (else socket.getfqdn())
                env["PET_LOCAL_ADDR"] = current.address or ""
            env["PET_RDZV_CONF"] = _rdzv_conf(spec.job_envs.get("PET_RDZV_CONF", ""), current.index == 0)
    else:
        env.update(_torch_env(tasks, current))
    if trial_token:
        env["PAI_TRIAL_TOKEN"] = trial_token
    return env


def _elastic_env(job: Job, role: TaskRoleSpec) -> dict[str, str]:
    """torchrun's elastic launch (each ``--x-y`` option reads ``PET_X_Y``): the c10d rendezvous store on the role's
    index 0 (always a member: it is below the minimum), at its ``rdzv`` port; a job's envs may set any of them."""
    assert role.elastic is not None
    first = next((t for t in job.tasks if t.role == role.name and t.index == 0), None)
    port = _first_port(first, RDZV_PORT_LABEL) if first is not None else ""
    return {
        "PET_NNODES": f"{role.elastic.min_instances}:{role.elastic.max_instances}",
        "PET_NPROC_PER_NODE": str(max(role.resources.gpu, 1)),
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": f"{first.address}:{port}" if first is not None and first.address else "",
        "PET_RDZV_ID": f"{job.key}-{job.attempt_index}-{role.name}",
        "PET_MAX_RESTARTS": str(ELASTIC_MAX_RESTARTS),
        # torch shares the rendezvous store with the workers and keeps the first round's rank 0 as their store for
        # good; ranks follow the nodes' addresses, so after a resize rank 0 can move and the nodes disagree on it
        # (their workers' init_process_group times out): each round's rank 0 then serves its own round
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }


def _rdzv_conf(theirs: str, host: bool) -> str:
    """The job's ``PET_RDZV_CONF`` with ``is_host`` added: index 0 hosts the c10d store, never another (torch would
    guess from the endpoint's address, and every task of a one-machine cluster would think it the host)."""
    if any(kv.split("=", 1)[0].strip() == "is_host" for kv in theirs.split(",")):
        return theirs
    return ",".join(x for x in (theirs, f"is_host={str(host).lower()}") if x)


def _torch_env(tasks: list[Task], current: Task) -> dict[str, str]:
    """PyTorch's env:// rendezvous: rank 0 is the first task of the first role."""
    rank0 = tasks[0]
    port = _first_port(rank0, TORCH_PORT_LABEL) or _first_port(rank0, "http")
    rank = next(i for i, t in enumerate(tasks) if (t.role, t.index) == (current.role, current.index))
    return {
        "MASTER_ADDR": rank0.address or "",
        "MASTER_PORT": port,
        "WORLD_SIZE": str(len(tasks)),
        "RANK": str(rank),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
    }
