"""Storages: admin-defined host paths (an NFS mount present on every node, say) that jobs mount by name.

A ``Storage`` is one entry of the cluster configuration's ``storages``; a ``StorageMount`` is what a job asked
for (``extras.storages`` or OpenPAI's ``teamwise_storage`` plugin), resolved at submission against the
configuration and the user's groups, so that the job runs with what it was accepted with.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection
from dataclasses import dataclass

from pai.domain.errors import InvalidParametersError

# Where a storage may not be mounted: the task's own mounts and the kernel's file systems.
RESERVED_MOUNT_PATHS = ("/pai", "/proc", "/sys", "/dev")
DEFAULT_MOUNT_ROOT = "/mnt"


@dataclass(frozen=True, slots=True)
class Storage:
    name: str
    path: str  # on every node
    read_only: bool = False
    groups: tuple[str, ...] = ()  # the groups that may mount it; () for everyone
    default: bool = False  # mounted by the teamwise_storage plugin when it names no storage

    def allows(self, groups: Collection[str]) -> bool:
        return not self.groups or any(g in groups for g in self.groups)

    def open_to(self, groups: Collection[str], granted: Collection[str] = (), *, admin: bool = False) -> bool:
        """May a user with these groups mount it: an admin always; a storage its groups' ``acls.storageConfigs``
        grant (``granted``); one that names no groups, or one of theirs."""
        return admin or self.name in granted or self.allows(groups)


@dataclass(frozen=True, slots=True)
class StorageMount:
    name: str
    mount_path: str
    field: str = ""  # where the job asked for it, for error messages
    host_path: str = ""  # resolved at submission
    read_only: bool = False


def default_mount_path(name: str) -> str:
    return f"{DEFAULT_MOUNT_ROOT}/{name}"


def mount_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a mount point inside a task, or None."""
    if not path.startswith("/"):
        return "must be an absolute path"
    if any(part == ".." for part in path.split("/")):
        return "must not contain '..'"
    normal = posixpath.normpath(path)
    if normal == "/":
        return "must not be the root directory"
    for reserved in RESERVED_MOUNT_PATHS:
        if normal == reserved or normal.startswith(reserved + "/"):
            return f"must not be under {reserved} (reserved for the platform)"
    return None


def resolve_mounts(
    requested: tuple[StorageMount, ...], storages: dict[str, Storage], groups: Collection[str], user: str,
    *, admin: bool = False, granted: Collection[str] = (),
) -> tuple[StorageMount, ...]:
    """The mounts a job asked for, checked against the cluster's storages and the user's groups, with their host
    paths. A request with no name (``teamwise_storage`` naming none) means the user's default storages.
    Anything not allowed raises InvalidParametersError naming the field."""
    usable = {n: s for n, s in storages.items() if s.open_to(groups, granted, admin=admin)}
    out: list[StorageMount] = []
    for m in requested:
        if not m.name:
            out.extend(StorageMount(s.name, default_mount_path(s.name), m.field, s.path, s.read_only)
                       for s in usable.values() if s.default)
            continue
        name_field = f"{m.field}.name" if m.field.startswith("extras.storages") else m.field
        storage = storages.get(m.name)
        if storage is None:
            known = ", ".join(sorted(usable)) or "none"
            raise InvalidParametersError(f"{name_field}: {m.name!r} is not a storage of this cluster "
                                         f"(storages you may use: {known})", field=name_field)
        if m.name not in usable:
            raise InvalidParametersError(
                f"{name_field}: user {user} may not use storage {m.name!r} (it is for groups "
                f"{', '.join(storage.groups)})", field=name_field)
        out.append(StorageMount(m.name, m.mount_path, m.field, storage.path, storage.read_only))
    seen: dict[str, str] = {}
    for m in out:
        path_field = f"{m.field}.mountPath" if m.field.startswith("extras.storages") else m.field
        problem = mount_path_problem(m.mount_path)
        if problem:
            raise InvalidParametersError(f"{path_field}: {m.mount_path!r} {problem}", field=path_field)
        normal = posixpath.normpath(m.mount_path)
        if normal in seen:
            raise InvalidParametersError(
                f"{path_field}: {m.mount_path!r} is already the mount path of storage {seen[normal]!r}",
                field=path_field)
        seen[normal] = m.name
    return tuple(out)
