"""OpenPAI's runtime plugins in a v2 job: the ``cmd`` plugin is run, ``ssh`` is honoured by the agents' SSH endpoints
(:mod:`pai.jobspec.sshplugin`), the others are reported as not run.

Where a plugin comes from, as openpai-runtime's ``initializer.py`` collects them for a task of role R: first the
prerequisites R lists in ``taskRoles.R.prerequisites`` (in that order; a name means the last prerequisite of that
name, whatever its type) whose ``plugin`` is ``com.microsoft.pai.runtimeplugin.<name>`` (its other fields but
``type`` and ``failurePolicy`` are the plugin's parameters), then ``extras.com.microsoft.pai.runtimeplugin``
(those whose ``taskroles``, when given, include R). The ``cmd`` plugin (``plugins/cmd/init.py``) runs
``callbacks`` (``taskStarts`` commands before the role's commands, ``taskSucceeds`` ones after they succeeded), or
``preCommands``/``postCommands``; each plugin's commands are a script of their own, run before the role's
commands in plugin order and after them in reverse order, stopping at the first failing command unless
``failurePolicy`` is ``ignore``. A failing script fails the task; post scripts run only when the role's
commands exited 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pai.domain.errors import InvalidProtocolError
from pai.domain.jobspec import SpecWarning
from pai.jobspec import sshbarrier

PREFIX = "com.microsoft.pai.runtimeplugin"
CMD = "cmd"
SSH = "ssh"
RUN_ELSEWHERE = frozenset({"teamwise_storage"})  # extras plugins pai honours outside this module (storages)
HONOURED = frozenset({SSH})  # plugins honoured outside this module wherever they are named (pai.jobspec.sshplugin)
EVENTS = {"taskStarts": 0, "taskSucceeds": 1}
_NOT_PARAMETERS = frozenset({"plugin", "failurePolicy", "type"})
_INFORMATIONAL = frozenset({"name", "uri", "require", "protocolVersion", "version", "contributor", "description"})
_CMD_PARAMETERS = frozenset({"callbacks", "preCommands", "postCommands"})

Render = Callable[[str, str], str]  # (command, field path) -> rendered command


@dataclass(frozen=True, slots=True)
class Plugin:
    path: str  # the prerequisite or extras entry it comes from
    name: str  # the short name (cmd, ssh, ...); "" for a plugin that is not a runtime plugin
    spelled: str  # as the job wrote it
    ignore_failures: bool
    parameters: dict[str, Any]
    params_path: str


def wrap(command: str, role_name: str, role: dict[str, Any], config: dict[str, Any], render: Render) -> str:
    """The role's ``command`` with its ``cmd`` plugins' commands around it, and the ``ssh`` plugins' barrier
    (:mod:`pai.jobspec.sshbarrier`) in its plugin's place (unchanged when it has none)."""
    pre: list[str] = []
    post: list[str] = []
    gang = (config.get("extras") or {}).get("gangAllocation", True) is not False
    for plugin in plugins_of(role_name, role, config):
        if plugin.name == SSH and sshbarrier.wanted(plugin.parameters, gang):
            lines = sshbarrier.barrier(plugin.parameters, plugin.params_path, config)
            pre.append(_script(lines, plugin.ignore_failures))
        if plugin.name != CMD:
            continue
        before, after = _cmd_commands(plugin, render)
        if before:
            pre.append(_script(before, plugin.ignore_failures))
        if after:
            post.insert(0, _script(after, plugin.ignore_failures))
    if post:
        command = f"(\n{command}\n) || exit $?"
    return "\n".join([*pre, command, *post])


def plugin_warnings(config: dict[str, Any]) -> list[SpecWarning]:
    """Every plugin some role would run that pai does not run, what ``cmd`` ignores, and plugin commands that
    no role runs; once each."""
    found: dict[str, SpecWarning] = {}
    roles: dict[str, dict[str, Any]] = config.get("taskRoles") or {}
    for role_name, role in roles.items():
        for plugin in plugins_of(role_name, role, config):
            if plugin.name == CMD:
                for warning in _cmd_warnings(plugin):
                    found.setdefault(warning.field, warning)
            elif plugin.name in HONOURED:
                continue
            elif plugin.name not in RUN_ELSEWHERE or plugin.path.startswith("prerequisites"):
                where = f"{plugin.path}.plugin"
                runs = (f"{PREFIX}.{CMD} and {PREFIX}.{SSH}" if plugin.path.startswith("prerequisites")
                        else "cmd, ssh and teamwise_storage")
                found.setdefault(where, SpecWarning(
                    where, f"plugin {plugin.spelled!r} is not run on this cluster (pai runs {runs})"))
    for warning in _never_run(config, roles):
        found.setdefault(warning.field, warning)
    return list(found.values())


def _never_run(config: dict[str, Any], roles: dict[str, dict[str, Any]]) -> Iterator[SpecWarning]:
    listed = {name for role in roles.values() for name in role.get("prerequisites") or []}
    for i, item in enumerate(config.get("prerequisites") or []):
        path = f"prerequisites[{i}]"
        if "plugin" in item and item["name"] not in listed:
            yield SpecWarning(f"{path}.plugin", "no role lists this prerequisite in taskRoles.<role>.prerequisites:"
                              " its plugin is not run")
        if "plugin" not in item:
            for key in sorted(_CMD_PARAMETERS & item.keys()):
                yield SpecWarning(f"{path}.{key}", f"not run: the prerequisite names no plugin ({PREFIX}.{CMD})")
    extras: dict[str, Any] = config.get("extras") or {}
    for i, entry in enumerate(extras.get(PREFIX) or []):
        for j, name in enumerate(entry.get("taskroles") or []):
            if name not in roles:
                where = f"extras.{PREFIX}[{i}].taskroles[{j}]"
                yield SpecWarning(where, f"{name!r} names no task role: the plugin does not run there")


def check_role_prerequisites(roles: dict[str, dict[str, Any]], items: list[dict[str, Any]]) -> None:
    """Every name in ``taskRoles.<r>.prerequisites`` must be a prerequisite's (of any type), as OpenPAI checks."""
    names = {item["name"] for item in items}
    for role_name, role in roles.items():
        for i, name in enumerate(role.get("prerequisites") or []):
            if name not in names:
                where = f"taskRoles.{role_name}.prerequisites[{i}]"
                raise InvalidProtocolError(f"{where}: {name!r} names no prerequisite", field=where)


def plugins_of(role_name: str, role: dict[str, Any], config: dict[str, Any]) -> Iterator[Plugin]:
    by_name = {item["name"]: (i, item) for i, item in enumerate(config.get("prerequisites") or [])}
    for name in role.get("prerequisites") or []:
        i, item = by_name[name]
        if "plugin" in item:
            spelled = str(item["plugin"])
            short = spelled[len(PREFIX) + 1:] if spelled.startswith(PREFIX + ".") else ""
            params = {k: v for k, v in item.items() if k not in _NOT_PARAMETERS}
            path = f"prerequisites[{i}]"
            yield Plugin(path, short, spelled, _ignores(item), params, path)
    extras: dict[str, Any] = config.get("extras") or {}
    for i, entry in enumerate(extras.get(PREFIX) or []):
        if "taskroles" in entry and role_name not in entry["taskroles"]:
            continue
        path = f"extras.{PREFIX}[{i}]"
        params = entry.get("parameters") or {}
        yield Plugin(path, str(entry["plugin"]), str(entry["plugin"]), _ignores(entry), params, f"{path}.parameters")


def _ignores(entry: dict[str, Any]) -> bool:
    return str(entry.get("failurePolicy", "fail")).lower() == "ignore"


def _cmd_commands(plugin: Plugin, render: Render) -> tuple[list[str], list[str]]:
    """``(pre, post)`` commands of a ``cmd`` plugin, rendered."""
    params, path = plugin.parameters, plugin.params_path
    if "callbacks" not in params:
        pre = [render(c, f"{path}.preCommands[{j}]") for j, c in enumerate(params.get("preCommands") or [])]
        post = [render(c, f"{path}.postCommands[{j}]") for j, c in enumerate(params.get("postCommands") or [])]
        return pre, post
    if "preCommands" in params or "postCommands" in params:
        raise InvalidProtocolError(f"{path}.callbacks: cannot be used with preCommands or postCommands"
                                   " (OpenPAI's cmd plugin refuses both)", field=f"{path}.callbacks")
    hooks: tuple[list[str], list[str]] = ([], [])
    for i, callback in enumerate(params["callbacks"]):
        if callback["event"] in EVENTS:
            where = f"{path}.callbacks[{i}].commands"
            hooks[EVENTS[callback["event"]]].extend(
                render(c, f"{where}[{j}]") for j, c in enumerate(callback["commands"]))
    return hooks


def _cmd_warnings(plugin: Plugin) -> Iterator[SpecWarning]:
    path, params = plugin.params_path, plugin.parameters
    for i, callback in enumerate(params.get("callbacks") or []):
        if callback["event"] not in EVENTS:
            where = f"{path}.callbacks[{i}].event"
            yield SpecWarning(where, f"{callback['event']!r} is not an event the cmd plugin runs commands on"
                              f" ({', '.join(EVENTS)}): its commands are not run")
    known = _CMD_PARAMETERS | (_INFORMATIONAL if path.startswith("prerequisites") else frozenset())
    for key in params:
        if key not in known:
            yield SpecWarning(f"{path}.{key}", "not a parameter of the cmd plugin: ignored")


def _script(commands: list[str], ignore_failures: bool) -> str:
    """One plugin's commands as a script of their own, in a shell of their own (as openpai-runtime runs them)."""
    body = "\n".join(commands if ignore_failures else ["set -e", *commands])
    quoted = "'" + body.replace("'", "'\\''") + "'"
    return f"sh -c {quoted} || true" if ignore_failures else f"sh -c {quoted} || exit $?"
