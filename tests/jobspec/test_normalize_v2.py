"""v2 YAML -> JobSpec: prerequisites, completion, deployments, templating and extras."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from pai.domain import InvalidProtocolError, JobSpec, PortSpec, Resources, TaskRoleSpec
from pai.domain.jobspec import RegistryAuth
from pai.jobspec import parse_job

from .builders import parse_v2, v2_job, v2_role


def _case(name: str) -> JobSpec:
    return parse_job((resources.files("job_schemas") / "cases" / "v2" / "valid" / name).read_bytes()).spec


def test_full_job_maps_every_field() -> None:
    spec = _case("full.yaml")
    assert (spec.name, spec.protocol_version) == ("full_job-2", 2)
    assert spec.virtual_cluster == "dev"
    assert spec.retry_count == 2
    assert (spec.priority_class, spec.priority, spec.gang) == ("prod", 100, False)
    assert spec.image == ""  # v2 images are per role
    assert spec.role("ps") == TaskRoleSpec(
        name="ps",
        instances=1,
        command="python ps.py",
        resources=Resources(gpu=0, cpu=2, memory_mb=1024),
        image="openpai/cuda:11",
        ports=(PortSpec("grpc", count=2),),
        min_failed=None,
        min_succeeded=None,
        image_auth=RegistryAuth("alice", "hunter2", "registry.example.com"),
    )
    worker = spec.role("worker")
    assert (worker.instances, worker.resources) == (4, Resources(gpu=2, cpu=4, memory_mb=8192))
    assert (worker.min_failed, worker.min_succeeded, worker.task_retry_count) == (2, 3, 1)
    assert (worker.shm_mb, worker.gpu_type, worker.image) == (1024, "V100", "openpai/cuda:11")
    assert worker.command.split("\n") == [
        "echo pre",
        "cd script_benchmarks",
        "python train.py --epochs 10 --lr 0.01 --verbose=true"
        " --data https://example.com/cifar-10.tar.gz --out hdfs://nn:9000/out/model --token s3cr3t",
        "echo post",
    ]


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        pytest.param(None, (1, None), id="absent"),
        pytest.param({}, (1, None), id="empty"),
        pytest.param({"minFailedInstances": -1, "minSucceededInstances": -1}, (None, None), id="-1 means none"),
        pytest.param({"minFailedInstances": None, "minSucceededInstances": None}, (None, None), id="null means none"),
        pytest.param({"minFailedInstances": 3, "minSucceededInstances": 2}, (3, 2), id="counts"),
    ],
)
def test_completion_thresholds(completion: dict[str, Any] | None, expected: tuple[int | None, int | None]) -> None:
    role = v2_role(instances=4) if completion is None else v2_role(instances=4, completion=completion)
    got = parse_v2(v2_job({"worker": role})).spec.task_roles[0]
    assert (got.min_failed, got.min_succeeded) == expected


@pytest.mark.parametrize(
    ("command", "parameters", "rendered"),
    [
        pytest.param("run <% $parameters.n %>", {"n": 3}, "run 3", id="number"),
        pytest.param("run <%$parameters.n%>", {"n": "x"}, "run x", id="no spaces"),
        pytest.param("run --v=<% $parameters.flag %>", {"flag": False}, "run --v=false", id="bool as JSON"),
        pytest.param("run '<% $parameters.empty %>'", {"empty": None}, "run ''", id="null renders empty"),
        pytest.param("run <% $parameters.opt.lr %>", {"opt": {"lr": 0.5}}, "run 0.5", id="nested key"),
        pytest.param("run <% $parameters.files[1] %>", {"files": ["a", "b"]}, "run b", id="list index"),
        pytest.param("a=<% $parameters.a %> b=<% $parameters.b %>", {"a": 1, "b": 2}, "a=1 b=2", id="several"),
        pytest.param("echo $HOME <no template>", {}, "echo $HOME <no template>", id="plain shell untouched"),
    ],
)
def test_parameters_are_rendered(command: str, parameters: dict[str, Any], rendered: str) -> None:
    job = v2_job({"worker": v2_role(commands=[command])}, parameters=parameters)
    assert parse_v2(job).spec.task_roles[0].command == rendered


def test_commands_join_with_newlines_and_are_trimmed() -> None:
    spec = parse_v2(v2_job({"worker": v2_role(commands=["  cd /tmp ", "ls", "echo done"])})).spec
    assert spec.task_roles[0].command == "cd /tmp\nls\necho done"


def test_secrets_render_in_commands_but_stay_in_config_unrendered() -> None:
    job = v2_job({"worker": v2_role(commands=["login --token <% $secrets.token %>"])}, secrets={"token": "t0k"})
    parsed = parse_v2(job)
    assert parsed.spec.task_roles[0].command == "login --token t0k"
    assert parsed.config["taskRoles"]["worker"]["commands"] == ["login --token <% $secrets.token %>"]


def test_data_script_output_are_visible_only_to_roles_that_select_them() -> None:
    prerequisites = [
        {"name": "image", "type": "dockerimage", "uri": "busybox"},
        {"name": "cifar", "type": "data", "uri": ["hdfs://nn/cifar"]},
    ]
    uses = v2_role(data="cifar", commands=["ls <% $data.uri[0] %> <% $data.name %>"])
    job = v2_job({"reader": uses}, prerequisites=prerequisites)
    assert parse_v2(job).spec.task_roles[0].command == "ls hdfs://nn/cifar cifar"
    job["taskRoles"]["other"] = v2_role(commands=["ls <% $data.uri[0] %>"])
    with pytest.raises(InvalidProtocolError) as caught:
        parse_v2(job)
    assert caught.value.field == "taskRoles.other.commands[0]"


def test_unknown_parameter_names_the_parameter_and_the_command() -> None:
    job = v2_job({"worker": v2_role(commands=["ok", "run <% $parameters.lr %>"])}, parameters={"epochs": 1})
    with pytest.raises(InvalidProtocolError) as caught:
        parse_v2(job)
    assert caught.value.field == "taskRoles.worker.commands[1]"
    assert "unknown parameter 'lr'" in caught.value.message


UNKNOWN_TAGS = [
    # OpenPAI's REST server writes a tag it cannot resolve back as "<% name %>"; its runtime then renders the
    # command with the job's secrets, if it has any, and what is left becomes empty.
    pytest.param("echo <% $env.HOME %>", None, "echo <% $env.HOME %>", id="unknown namespace kept"),
    pytest.param("echo <%$env.list[0]%>", None, "echo <% $env.list.0 %>", id="kept as OpenPAI writes it back"),
    pytest.param("echo <% 1 + 1 %>", None, "echo <% 1 + 1 %>", id="not a reference kept"),
    pytest.param("echo <% name %>", None, "echo <% name %>", id="no dollar kept"),
    pytest.param("echo <% $env.HOME %>", {}, "echo <% $env.HOME %>", id="empty secrets: kept"),
    pytest.param("echo [<% $env.HOME %>] <% $secrets.k %>", {"k": "v"}, "echo [] v", id="job with secrets: empty"),
]


@pytest.mark.parametrize(("command", "secrets", "rendered"), UNKNOWN_TAGS)
def test_unknown_tags_as_openpai_renders_them(command: str, secrets: dict[str, Any] | None, rendered: str) -> None:
    job = v2_job({"worker": v2_role(commands=[command])}, **({} if secrets is None else {"secrets": secrets}))
    assert parse_v2(job).spec.task_roles[0].command == rendered


def test_unknown_tag_in_image_auth_as_in_commands() -> None:
    image = {"name": "image", "type": "dockerimage", "uri": "img",
             "auth": {"username": "<% $env.user %>", "password": "<% $secrets.pw %>"}}
    kept = parse_v2(v2_job(prerequisites=[{**image, "auth": {"username": "<% $env.user %>"}}])).spec
    assert kept.task_roles[0].image_auth is not None and kept.task_roles[0].image_auth.username == "<% $env.user %>"
    blank = parse_v2(v2_job(prerequisites=[image], secrets={"pw": "p"})).spec.task_roles[0].image_auth
    assert blank is not None and (blank.username, blank.password) == ("", "p")


@pytest.mark.parametrize("tag", ["<%# items %>x<%/ items %>", "<%^ items %>", "<%! note %>", "<%& raw %>",
                                 "<%> partial %>", "<%{ raw }%>", "<%=[[ ]]=%>"])
def test_mustache_sections_comments_partials_are_refused(tag: str) -> None:
    """OpenPAI's REST server drops these silently (a section with what it encloses); pai refuses them."""
    with pytest.raises(InvalidProtocolError, match="unsupported template") as caught:
        parse_v2(v2_job({"worker": v2_role(commands=[f"echo {tag}"])}))
    assert caught.value.field == "taskRoles.worker.commands[0]"


def test_images_are_per_role() -> None:
    prerequisites = [
        {"name": "small", "type": "dockerimage", "uri": "busybox"},
        {"name": "big", "type": "dockerimage", "uri": "pytorch/pytorch:2.1"},
    ]
    job = v2_job({"a": v2_role(dockerImage="small"), "b": v2_role(dockerImage="big")}, prerequisites=prerequisites)
    assert [r.image for r in parse_v2(job).spec.task_roles] == ["busybox", "pytorch/pytorch:2.1"]


def test_same_name_may_be_reused_across_prerequisite_types() -> None:
    prerequisites = [
        {"name": "x", "type": "dockerimage", "uri": "busybox"},
        {"name": "x", "type": "script", "uri": "github.com/a/b"},
    ]
    job = v2_job({"worker": v2_role(dockerImage="x", script="x")}, prerequisites=prerequisites)
    assert parse_v2(job).spec.task_roles[0].image == "busybox"


def test_deployment_wraps_only_when_chosen_by_defaults() -> None:
    deployments = [{"name": "prod", "taskRoles": {"worker": {"preCommands": ["pre"], "postCommands": ["post"]}}}]
    unchosen = v2_job(deployments=deployments)
    assert parse_v2(unchosen).spec.task_roles[0].command == "echo hi"
    chosen = v2_job(deployments=deployments, defaults={"deployment": "prod"})
    assert parse_v2(chosen).spec.task_roles[0].command == "pre\necho hi\npost"


@pytest.mark.parametrize(
    ("field", "value", "attribute", "expected"),
    [
        pytest.param("protocolVersion", "2", "protocol_version", 2, id="protocolVersion as string"),
        pytest.param("defaults", {"virtualCluster": "vc1"}, "virtual_cluster", "vc1", id="virtual cluster"),
        pytest.param("defaults", {}, "virtual_cluster", "default", id="default virtual cluster"),
        pytest.param("jobRetryCount", 5, "retry_count", 5, id="job retry count"),
        pytest.param("extras", {"hivedScheduler": {"jobPriorityClass": "oppo"}}, "priority", -1, id="oppo"),
        pytest.param("extras", {"gangAllocation": False}, "gang", False, id="no gang"),
        pytest.param("extras", {"submitFrom": "vscode"}, "gang", True, id="gang by default"),
        pytest.param("extras", {"preemptible": False}, "preemptible", False, id="non-preemptible"),
        pytest.param("extras", {}, "preemptible", True, id="preemptible by default"),
        pytest.param("extras", {"expectedDurationSeconds": 90.5}, "expected_seconds", 90.5, id="expected duration"),
    ],
)
def test_job_level_fields(field: str, value: Any, attribute: str, expected: object) -> None:
    assert getattr(parse_v2(v2_job(**{field: value})).spec, attribute) == expected


def test_ports_keep_their_order() -> None:
    resources_ = {"cpu": 1, "memoryMB": 256, "gpu": 1, "ports": {"tensorboard": 1, "nccl": 4}}
    role = parse_v2(v2_job({"worker": v2_role(resourcePerInstance=resources_)})).spec.task_roles[0]
    assert role.ports == (PortSpec("tensorboard", 1), PortSpec("nccl", 4))


def test_sku_type_per_role() -> None:
    extras = {"hivedScheduler": {"taskRoles": {"gpu": {"skuType": "A100"}, "cpu": {"skuType": None}}}}
    job = v2_job({"gpu": v2_role(), "cpu": v2_role()}, extras=extras)
    assert [r.gpu_type for r in parse_v2(job).spec.task_roles] == ["A100", None]


def test_v2_as_json_body() -> None:
    spec = parse_job(json.dumps(v2_job()), "application/json").spec
    assert (spec.protocol_version, spec.task_roles[0].image) == (2, "busybox")


def test_integral_floats_become_ints() -> None:
    resources_ = {"cpu": 2.0, "memoryMB": 512.0, "gpu": 1.0, "ports": {"p": 2.0}}
    role = parse_v2(v2_job({"worker": v2_role(instances=3.0, resourcePerInstance=resources_)})).spec.task_roles[0]
    assert (role.instances, role.resources, role.ports) == (
        3,
        Resources(gpu=1, cpu=2, memory_mb=512),
        (PortSpec("p", 2),),
    )
    assert all(type(n) is int for n in (role.instances, role.resources.gpu, role.ports[0].count))


def test_registry_auth_renders_secrets_for_the_roles_using_the_image() -> None:
    image = {"name": "private", "type": "dockerimage", "uri": "reg.example:5000/team/img:1",
             "auth": {"username": "bot", "password": "<% $secrets.regpass %>", "registryuri": "reg.example:5000"}}
    job = v2_job({"a": v2_role(dockerImage="private"), "b": v2_role()},
                 prerequisites=[{"name": "image", "type": "dockerimage", "uri": "busybox"}, image],
                 secrets={"regpass": "s3cret"})
    spec = parse_v2(job).spec
    auth = spec.role("a").image_auth
    assert auth is not None and (auth.username, auth.password, auth.registry) == ("bot", "s3cret", "reg.example:5000")
    assert "s3cret" not in repr(auth)
    assert spec.role("b").image_auth is None


def test_registry_auth_naming_an_unknown_secret_is_refused_even_when_unused() -> None:
    image = {"name": "other", "type": "dockerimage", "uri": "img", "auth": {"password": "<% $secrets.nope %>"}}
    job = v2_job(prerequisites=[{"name": "image", "type": "dockerimage", "uri": "busybox"}, image])
    with pytest.raises(InvalidProtocolError) as e:
        parse_v2(job)
    assert e.value.field is not None and e.value.field.startswith("prerequisites[1].auth.password")


def test_storages_and_teamwise_storage_become_requested_mounts() -> None:
    extras = {
        "storages": [{"name": "data", "mountPath": "/data"}, {"name": "models"}],
        "com.microsoft.pai.runtimeplugin": [
            {"plugin": "ssh", "parameters": {"jobssh": True}},
            {"plugin": "teamwise_storage", "parameters": {"storageConfigNames": ["nfs1"]}},
            {"plugin": "teamwise_storage"},
        ],
    }
    spec = parse_v2(v2_job(extras=extras)).spec
    assert [(m.name, m.mount_path, m.field) for m in spec.storages] == [
        ("data", "/data", "extras.storages[0]"),
        ("models", "/mnt/models", "extras.storages[1]"),
        ("nfs1", "/mnt/nfs1", "extras.com.microsoft.pai.runtimeplugin[1].parameters.storageConfigNames[0]"),
        ("", "", "extras.com.microsoft.pai.runtimeplugin[2].parameters.storageConfigNames"),
    ]


@pytest.mark.parametrize(("storages", "field"), [
    ([{"mountPath": "/x"}], "extras.storages[0].name"),
    ([{"name": "../etc"}], "extras.storages[0].name"),
    ([{"name": "a", "readOnly": False}], "extras.storages[0].readOnly"),
])
def test_malformed_storage_requests_are_refused_by_the_schema(storages: list[Any], field: str) -> None:
    with pytest.raises(InvalidProtocolError) as e:
        parse_v2(v2_job(extras={"storages": storages}))
    assert e.value.field == field
