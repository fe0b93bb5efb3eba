"""What a job asks for that pai accepts and does not honour is a warning naming the field, never dropped silently."""

from __future__ import annotations

from typing import Any

import pytest

from pai.jobspec.plugins import PREFIX
from tests.jobspec.builders import parse_v1, parse_v2, v1_job, v2_job, v2_role

CMD = f"{PREFIX}.cmd"
IMAGE = {"name": "image", "type": "dockerimage", "uri": "busybox"}

V1 = [
    # (name, fields over the minimal v1 job, [(field, words of the message)])
    ("nothing unhonoured", {}, []),
    ("authFile", {"authFile": "hdfs://nn/auth"}, [("authFile", "not used")]),
    ("empty authFile asks for nothing", {"authFile": ""}, []),
    ("killAllOnCompletedTaskNumber, with OpenPAI's X-Warning words", {"killAllOnCompletedTaskNumber": 1},
     [("killAllOnCompletedTaskNumber", "has been obsoleted, please use minFailedTaskCount")]),
    ("gangAllocation false is honoured: tasks are placed one by one", {"extras": {"gangAllocation": False}}, []),
    ("gangAllocation true is what pai does", {"extras": {"gangAllocation": True}}, []),
    ("an extras key pai does not read", {"extras": {"jobStatusChangeNotification": {"failed": True}}},
     [("extras.jobStatusChangeNotification", "not used")]),
    ("v1 has no storages", {"extras": {"storages": [{"name": "s"}]}}, [("extras.storages", "not used")]),
    ("hived: honoured and informational fields", {"extras": {"hivedScheduler": {"jobPriorityClass": "prod",
        "taskRoles": {"worker": {"skuType": "V100", "skuNum": 2, "affinityGroupName": None}}}}}, []),
    ("hived: fields pai's scheduler does not use", {"extras": {"hivedScheduler": {
        "lazyPreemptionEnable": True, "taskRoles": {"worker": {"affinityGroupName": "g", "pinnedCellId": "c"}}}}},
     [("extras.hivedScheduler.lazyPreemptionEnable", "not used"),
      ("extras.hivedScheduler.taskRoles.worker.affinityGroupName", "not used"),
      ("extras.hivedScheduler.taskRoles.worker.pinnedCellId", "not used")]),
    ("submitFrom only informs", {"extras": {"submitFrom": "vscode"}}, []),
]


@pytest.mark.parametrize(("name", "over", "expected"), V1, ids=[c[0] for c in V1])
def test_v1_warnings(name: str, over: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    warnings = parse_v1(v1_job(**over)).warnings
    assert [w.field for w in warnings] == [field for field, _ in expected]
    for warning, (_, words) in zip(warnings, expected, strict=True):
        assert words in warning.message


def _plugins(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"extras": {PREFIX: list(entries)}}


V2 = [
    # (name, roles, fields over the minimal v2 job, [(field, words of the message)])
    ("nothing unhonoured", None, {}, []),
    ("infiniband", {"worker": v2_role(extraContainerOptions={"infiniband": True})}, {},
     [("taskRoles.worker.extraContainerOptions.infiniband", "InfiniBand")]),
    ("infiniband false asks for nothing", {"worker": v2_role(extraContainerOptions={"infiniband": False})}, {}, []),
    ("an unknown container option", {"worker": v2_role(extraContainerOptions={"gpuMemoryMB": 1})}, {},
     [("taskRoles.worker.extraContainerOptions.gpuMemoryMB", "not used")]),
    ("a runtime plugin pai does not run", None, _plugins({"plugin": "tensorboard", "parameters": {"port": 1}}),
     [(f"extras.{PREFIX}[0].plugin", "'tensorboard' is not run")]),
    ("the ssh plugin is honoured", None, _plugins({"plugin": "ssh", "parameters": {"jobssh": True}}), []),
    ("ssh: jobssh in a job that is not a gang", None,
     {**_plugins({"plugin": "ssh", "parameters": {"jobssh": True}}), "extras": {
         "gangAllocation": False, PREFIX: [{"plugin": "ssh", "parameters": {"jobssh": True}}]}},
     [(f"extras.{PREFIX}[0].parameters.jobssh", "gangAllocation: false")]),
    ("ssh: a barrier without jobssh, a system userssh, an unknown parameter", None,
     _plugins({"plugin": "ssh", "parameters": {"sshbarrier": True, "userssh": {"type": "system", "value": "k"},
                                                "port": 22}}),
     [(f"extras.{PREFIX}[0].parameters.sshbarrier", "without jobssh"),
      (f"extras.{PREFIX}[0].parameters.userssh.type", "'system' is not honoured"),
      (f"extras.{PREFIX}[0].parameters.port", "not a parameter of the ssh plugin")]),
    ("teamwise_storage and cmd run", None, _plugins({"plugin": "teamwise_storage"}, {"plugin": "cmd"}), []),
    ("a plugin limited to a role that does not exist", None,
     _plugins({"plugin": "cmd", "taskroles": ["nope"], "parameters": {"preCommands": ["x"]}}),
     [(f"extras.{PREFIX}[0].taskroles[0]", "'nope' names no task role")]),
    ("a prerequisite run by another plugin", {"worker": v2_role(prerequisites=["repo"])},
     {"prerequisites": [IMAGE, {"type": "script", "name": "repo", "plugin": f"{PREFIX}.git"}]},
     [("prerequisites[1].plugin", f"'{PREFIX}.git' is not run")]),
    ("a plugin that is not a runtime plugin", {"worker": v2_role(prerequisites=["s"])},
     {"prerequisites": [IMAGE, {"type": "script", "name": "s", "plugin": "my.own"}]},
     [("prerequisites[1].plugin", "'my.own' is not run")]),
    ("a plugin prerequisite no role lists", None,
     {"prerequisites": [IMAGE, {"type": "script", "name": "s", "plugin": CMD, "preCommands": ["x"]}]},
     [("prerequisites[1].plugin", "no role lists")]),
    ("callbacks without a plugin", {"worker": v2_role(prerequisites=["s"])},
     {"prerequisites": [IMAGE, {"type": "script", "name": "s", "callbacks": []}]},
     [("prerequisites[1].callbacks", "names no plugin")]),
    ("a callback event cmd does not run", {"worker": v2_role(prerequisites=["s"])},
     {"prerequisites": [IMAGE, {"type": "script", "name": "s", "plugin": CMD,
                                "callbacks": [{"event": "taskFails", "commands": ["x"]}]}]},
     [("prerequisites[1].callbacks[0].event", "'taskFails' is not an event")]),
    ("a parameter cmd does not read", {"worker": v2_role(prerequisites=["s"])},
     {"prerequisites": [IMAGE, {"type": "script", "name": "s", "plugin": CMD, "timeout": 5}]},
     [("prerequisites[1].timeout", "not a parameter of the cmd plugin")]),
    ("require is not followed", None,
     {"prerequisites": [IMAGE, {"type": "data", "name": "d", "uri": ["/d"], "require": ["image"]}]},
     [("prerequisites[1].require", "not followed")]),
    ("an unknown defaults key", None, {"defaults": {"virtualCluster": "default", "cluster": "x"}},
     [("defaults.cluster", "not used")]),
]


@pytest.mark.parametrize(("name", "roles", "over", "expected"), V2, ids=[c[0] for c in V2])
def test_v2_warnings(name: str, roles: dict[str, Any] | None, over: dict[str, Any],
                     expected: list[tuple[str, str]]) -> None:
    warnings = parse_v2(v2_job(roles, **over)).warnings
    assert [w.field for w in warnings] == [field for field, _ in expected]
    for warning, (_, words) in zip(warnings, expected, strict=True):
        assert words in warning.message


def test_a_plugin_every_role_runs_is_one_warning() -> None:
    job = v2_job({"a": v2_role(), "b": v2_role()}, **_plugins({"plugin": "tensorboard"}))
    assert [w.field for w in parse_v2(job).warnings] == [f"extras.{PREFIX}[0].plugin"]
