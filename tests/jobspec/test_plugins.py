"""v2 prerequisites run by OpenPAI's ``cmd`` runtime plugin (``plugin`` + ``callbacks``, no ``uri``),
``taskRoles.<r>.prerequisites``, and the cmd plugin in ``extras``: what is accepted, and how the composed command
runs (in a real ``sh``, as both runtimes run it)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from pai.domain.errors import InvalidProtocolError
from pai.jobspec.plugins import PREFIX
from tests.jobspec.builders import parse_v2, v2_job, v2_role

CMD = f"{PREFIX}.cmd"
IMAGE = {"name": "image", "type": "dockerimage", "uri": "busybox"}


def cmd_prerequisite(name: str, starts: list[str] | None = None, succeeds: list[str] | None = None,
                     **over: Any) -> dict[str, Any]:
    callbacks = [{"event": "taskStarts", "commands": starts}] if starts else []
    callbacks += [{"event": "taskSucceeds", "commands": succeeds}] if succeeds else []
    return {"type": "script", "name": name, "plugin": CMD, "callbacks": callbacks, **over}


def command_of(prerequisites: list[dict[str, Any]], uses: list[str], commands: list[str], **over: Any) -> str:
    job = v2_job({"worker": v2_role(prerequisites=uses, commands=commands)},
                 prerequisites=[IMAGE, *prerequisites], **over)
    return parse_v2(job).spec.task_roles[0].command


def run(command: str, tmp_path: Path) -> tuple[int, str]:
    done = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout


def test_openpais_documented_prerequisites_example_is_accepted_and_runs_its_callbacks(tmp_path: Path) -> None:
    """OpenPAI's docs/manual/cluster-user/how-to-use-advanced-job-settings.md ("Use Prerequisites"), commands
    replaced by echoes: a script and a data prerequisite with plugin + callbacks and no uri, listed by the role."""
    prerequisites = [cmd_prerequisite("install-git", ["echo apt update", "echo apt install -y git"]),
                     {**cmd_prerequisite("covid-19-data", ["echo mkdir -p /dataset/covid-19"]), "type": "data"}]
    command = command_of(prerequisites, ["install-git", "covid-19-data"], ["echo ls -la /dataset/covid-19"])
    assert run(command, tmp_path) == (0, "apt update\napt install -y git\nmkdir -p /dataset/covid-19\n"
                                         "ls -la /dataset/covid-19\n")


RUNS = [
    # (name, prerequisites, role's commands, exit code, output)
    ("pre in order, post after success in reverse order",
     [cmd_prerequisite("a", ["echo pre-a"], ["echo post-a"]), cmd_prerequisite("b", ["echo pre-b"], ["echo post-b"])],
     ["echo main"], 0, "pre-a\npre-b\nmain\npost-b\npost-a\n"),
    ("a failing pre command fails the task with its code; nothing after it runs",
     [cmd_prerequisite("a", ["echo pre", "exit 7", "echo never"], ["echo post"])], ["echo main"], 7, "pre\n"),
    ("failurePolicy ignore: a failing command does not stop the others",
     [cmd_prerequisite("a", ["false", "echo still"], failurePolicy="ignore")], ["echo main"], 0, "still\nmain\n"),
    ("a failing role: post commands do not run; the role's code stands",
     [cmd_prerequisite("a", None, ["echo post"])], ["echo main", "exit 3"], 3, "main\n"),
    ("a failing post command fails the task",
     [cmd_prerequisite("a", None, ["exit 4", "echo never"])], ["echo main"], 4, "main\n"),
    ("quotes survive", [cmd_prerequisite("a", ["echo \"it's\" 'a \"b\"'"])], ["echo main"], 0, "it's a \"b\"\nmain\n"),
    ("a plugin's shell is its own: its variables do not reach the role (as in OpenPAI's runtime)",
     [cmd_prerequisite("a", ["X=1", "export Y=2"])], ['echo "x=${X-} y=${Y-}"'], 0, "x= y=\n"),
    ("preCommands/postCommands parameters", [{"type": "script", "name": "a", "plugin": CMD,
                                              "preCommands": ["echo pre"], "postCommands": ["echo post"]}],
     ["echo main"], 0, "pre\nmain\npost\n"),
    ("a prerequisite without a plugin runs nothing", [{"type": "data", "name": "a", "uri": ["/data"]}],
     ["echo main"], 0, "main\n"),
]


@pytest.mark.parametrize(("name", "prerequisites", "commands", "code", "output"), RUNS, ids=[r[0] for r in RUNS])
def test_cmd_plugin_commands_run_around_the_roles(name: str, prerequisites: list[dict[str, Any]],
                                                   commands: list[str], code: int, output: str,
                                                   tmp_path: Path) -> None:
    command = command_of(prerequisites, [p["name"] for p in prerequisites], commands)
    assert run(command, tmp_path) == (code, output)


def test_a_role_without_plugins_keeps_its_command_as_it_was() -> None:
    assert command_of([cmd_prerequisite("a", ["echo pre"])], [], ["echo main", "echo two"]) == "echo main\necho two"


def test_extras_cmd_plugin_runs_in_the_roles_it_names(tmp_path: Path) -> None:
    extras = {PREFIX: [{"plugin": "cmd", "taskroles": ["worker"], "parameters": {"preCommands": ["echo setup"]}}]}
    job = v2_job({"worker": v2_role(commands=["echo w"]), "ps": v2_role(commands=["echo ps"])}, extras=extras)
    roles = {r.name: r.command for r in parse_v2(job).spec.task_roles}
    assert run(roles["worker"], tmp_path) == (0, "setup\nw\n")
    assert roles["ps"] == "echo ps"


def test_plugin_commands_are_rendered_like_the_roles(tmp_path: Path) -> None:
    prerequisite = cmd_prerequisite("a", ["echo <% $parameters.who %> <% $secrets.key %>"])
    command = command_of([prerequisite], ["a"], ["true"], parameters={"who": "me"}, secrets={"key": "k"})
    assert run(command, tmp_path) == (0, "me k\n")


def test_plugin_commands_count_towards_the_roles_rendered_length() -> None:
    prerequisite = cmd_prerequisite("a", ["echo <% $parameters.big %>"] * 3)
    with pytest.raises(InvalidProtocolError, match="longer than 65536 characters"):
        command_of([prerequisite], ["a"], ["true"], parameters={"big": "x" * 30_000})


REFUSED = [
    # (name, prerequisites, role's prerequisites, field, words)
    ("a role's prerequisite must exist", [cmd_prerequisite("a", ["true"])], ["a", "b"],
     "taskRoles.worker.prerequisites[1]", "'b' names no prerequisite"),
    ("callbacks with preCommands", [cmd_prerequisite("a", ["true"], preCommands=["x"])], ["a"],
     "prerequisites[1].callbacks", "cannot be used with preCommands"),
    ("a dockerimage still needs its uri", [{"type": "dockerimage", "name": "other", "plugin": CMD}], [],
     "prerequisites[1].uri", "is required"),
    ("a callback needs commands", [{"type": "script", "name": "a", "plugin": CMD, "callbacks": [{"event": "x"}]}],
     ["a"], "prerequisites[1].callbacks[0].commands", "is required"),
]


@pytest.mark.parametrize(("name", "prerequisites", "uses", "field", "words"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused(name: str, prerequisites: list[dict[str, Any]], uses: list[str], field: str, words: str) -> None:
    with pytest.raises(InvalidProtocolError) as caught:
        command_of(prerequisites, uses, ["true"])
    assert caught.value.field == field and words in caught.value.message


def test_a_role_may_name_a_prerequisite_of_any_type() -> None:
    """As OpenPAI's protocol.js checks it: one set of every prerequisite's name."""
    assert command_of([{"type": "output", "name": "out", "uri": "/o"}], ["image", "out"], ["true"]) == "true"
