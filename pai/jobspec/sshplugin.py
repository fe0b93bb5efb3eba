"""OpenPAI's ``ssh`` runtime plugin, honoured without an sshd in the image: the node agent serves every task an SSH
endpoint (:mod:`pai.protocol.ssh`), and the plugin says what it adds for a role.

As openpai-runtime's ``plugins/ssh`` reads its parameters: ``jobssh`` (``str(value).lower() == "true"``) gives the
role's tasks the job's key pair and ``Host <role>-<index>`` entries in ``~/.ssh``; ``userssh`` of type ``custom`` lets
its ``value`` (public key lines) in; ``sshbarrier`` (with ``jobssh``) waits for the peers before the role's commands
(:mod:`pai.jobspec.sshbarrier`). Like OpenPAI, a job with ``gangAllocation: false`` gets no ``jobssh`` (its tasks
may start before their peers are placed). ``userssh`` of type ``system`` is not honoured (a warning says so).
Several ssh plugins of one role add up.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pai.domain.errors import InvalidProtocolError
from pai.domain.jobspec import SpecWarning, SshPlugin
from pai.domain.sshkeys import key_problem
from pai.jobspec.plugins import SSH, Plugin, plugins_of

CUSTOM = "custom"
_PARAMETERS = frozenset({"jobssh", "userssh", "sshbarrier", "sshbarrierTimeout"})
_INFORMATIONAL = frozenset({"name", "uri", "require", "protocolVersion", "version", "contributor", "description"})


def role_ssh(role_name: str, role: dict[str, Any], config: dict[str, Any]) -> SshPlugin | None:
    """What the role's ssh plugins ask for; None when it has none. InvalidProtocolError for a ``userssh`` that is
    not an object, or a ``custom`` value that holds something else than public key lines."""
    found: SshPlugin | None = None
    gang = (config.get("extras") or {}).get("gangAllocation", True) is not False
    for plugin in _ssh_plugins(role_name, role, config):
        job_ssh = gang and _flag(plugin, "jobssh")
        keys = _user_keys(plugin)
        if found is not None:
            job_ssh, keys = job_ssh or found.job_ssh, found.user_keys + keys
        found = SshPlugin(job_ssh, tuple(dict.fromkeys(keys)))
    return found


def ssh_warnings(config: dict[str, Any]) -> Iterator[SpecWarning]:
    """What the job's ssh plugins ask for that pai does not do, once each."""
    gang = (config.get("extras") or {}).get("gangAllocation", True) is not False
    seen: set[str] = set()
    for role_name, role in (config.get("taskRoles") or {}).items():
        for plugin in _ssh_plugins(role_name, role, config):
            if plugin.path in seen:
                continue
            seen.add(plugin.path)
            yield from _warnings(plugin, gang)


def _warnings(plugin: Plugin, gang: bool) -> Iterator[SpecWarning]:
    path, params = plugin.params_path, plugin.parameters
    if not gang and _flag(plugin, "jobssh"):
        yield SpecWarning(f"{path}.jobssh", "not honoured for a job with gangAllocation: false (as OpenPAI's ssh "
                          "plugin does): its tasks may start before their peers are placed")
    if str(params.get("sshbarrier", "")).lower() == "true" and not _flag(plugin, "jobssh"):
        yield SpecWarning(f"{path}.sshbarrier", "not honoured without jobssh: true (as OpenPAI's ssh plugin)")
    userssh = params.get("userssh")
    if isinstance(userssh, dict) and str(userssh.get("type", CUSTOM)) != CUSTOM:
        yield SpecWarning(f"{path}.userssh.type", f"{userssh.get('type')!r} is not honoured (pai lets in userssh "
                          "keys of type custom, and your own keys: `pai ssh-key add`)")
    known = _PARAMETERS | (_INFORMATIONAL if path.startswith("prerequisites") else frozenset())
    for key in params:
        if key not in known:
            yield SpecWarning(f"{path}.{key}", "not a parameter of the ssh plugin: ignored")


def _ssh_plugins(role_name: str, role: dict[str, Any], config: dict[str, Any]) -> Iterator[Plugin]:
    return (p for p in plugins_of(role_name, role, config) if p.name == SSH)


def _flag(plugin: Plugin, name: str) -> bool:
    value = plugin.parameters.get(name, False)
    if not isinstance(value, bool | str):
        where = f"{plugin.params_path}.{name}"
        raise InvalidProtocolError(f"{where}: must be a boolean, not {value!r}", field=where)
    return str(value).lower() == "true"


def _user_keys(plugin: Plugin) -> tuple[str, ...]:
    userssh = plugin.parameters.get("userssh")
    where = f"{plugin.params_path}.userssh"
    if userssh is None:
        return ()
    if not isinstance(userssh, dict):
        raise InvalidProtocolError(f"{where}: must be an object like {{type: custom, value: 'ssh-ed25519 AAAA...'}}",
                                   field=where)
    value = userssh.get("value", "")
    if str(userssh.get("type", CUSTOM)) != CUSTOM or value in ("", None):
        return ()
    if not isinstance(value, str):
        raise InvalidProtocolError(f"{where}.value: must be public key lines, not {value!r}", field=f"{where}.value")
    keys = [line.strip() for line in value.replace("\\n", "\n").splitlines() if line.strip()]
    for i, line in enumerate(keys):
        problem = key_problem(line)
        if problem is not None:
            raise InvalidProtocolError(f"{where}.value: line {i + 1} is not an SSH public key: {problem}",
                                       field=f"{where}.value")
    return tuple(keys)
