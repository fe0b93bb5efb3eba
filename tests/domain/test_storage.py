"""Storage mounts resolved against the cluster's storages and the user's groups: a table of named cases."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pai.domain.errors import InvalidParametersError
from pai.domain.storage import Storage, StorageMount, mount_path_problem, resolve_mounts

STORAGES = {
    "shared": Storage("shared", "/nfs/shared"),
    "ro": Storage("ro", "/nfs/datasets", read_only=True),
    "team": Storage("team", "/nfs/team", groups=("vision",)),
    "home": Storage("home", "/nfs/home", default=True),
    "teamdefault": Storage("teamdefault", "/nfs/td", groups=("vision",), default=True),
}


def mount(name: str, path: str = "", field: str = "extras.storages[0]") -> StorageMount:
    return StorageMount(name, path or f"/mnt/{name}", field)


@dataclass(frozen=True)
class Ok:
    name: str
    requested: tuple[StorageMount, ...]
    groups: frozenset[str]
    expected: tuple[tuple[str, str, str, bool], ...]  # name, mount path, host path, read-only
    admin: bool = False


OK_CASES = [
    Ok("open storage", (mount("shared"),), frozenset({"default"}), (("shared", "/mnt/shared", "/nfs/shared", False),)),
    Ok("read-only storage keeps its flag", (mount("ro", "/data"),), frozenset({"default"}),
       (("ro", "/data", "/nfs/datasets", True),)),
    Ok("group storage for a member", (mount("team"),), frozenset({"default", "vision"}),
       (("team", "/mnt/team", "/nfs/team", False),)),
    Ok("admins may mount any", (mount("team"),), frozenset({"default", "admingroup"}),
       (("team", "/mnt/team", "/nfs/team", False),), admin=True),
    Ok("no name: the defaults the user may use", (StorageMount("", "", "extras.plugin"),), frozenset({"default"}),
       (("home", "/mnt/home", "/nfs/home", False),)),
    Ok("no name for a member: every default of theirs", (StorageMount("", "", "p"),), frozenset({"vision"}),
       (("home", "/mnt/home", "/nfs/home", False), ("teamdefault", "/mnt/teamdefault", "/nfs/td", False))),
    Ok("the same storage at two paths", (mount("shared", "/a"), mount("shared", "/b", "extras.storages[1]")),
       frozenset({"default"}), (("shared", "/a", "/nfs/shared", False), ("shared", "/b", "/nfs/shared", False))),
]


@pytest.mark.parametrize("case", OK_CASES, ids=lambda c: c.name)
def test_allowed_mounts_get_their_host_paths(case: Ok) -> None:
    got = resolve_mounts(case.requested, STORAGES, case.groups, "alice", admin=case.admin)
    assert tuple((m.name, m.mount_path, m.host_path, m.read_only) for m in got) == case.expected


@dataclass(frozen=True)
class Refused:
    name: str
    requested: tuple[StorageMount, ...]
    field: str
    says: str


REFUSED_CASES = [
    Refused("unknown storage", (mount("nope"),), "extras.storages[0].name", "'nope' is not a storage of this cluster"),
    Refused("a group's storage for a non-member", (mount("team"),), "extras.storages[0].name",
            "user alice may not use storage 'team' (it is for groups vision)"),
    Refused("teamwise plugin naming a group's storage",
            (StorageMount("team", "/mnt/team", "extras.plugin[0].parameters.storageConfigNames[0]"),),
            "extras.plugin[0].parameters.storageConfigNames[0]", "may not use storage 'team'"),
    Refused("relative mount path", (mount("shared", "data"),), "extras.storages[0].mountPath", "absolute path"),
    Refused("dot-dot in the mount path", (mount("shared", "/mnt/../etc"),), "extras.storages[0].mountPath", "'..'"),
    Refused("the root", (mount("shared", "/"),), "extras.storages[0].mountPath", "root directory"),
    Refused("over the platform's mounts", (mount("shared", "/pai/code"),), "extras.storages[0].mountPath",
            "reserved for the platform"),
    Refused("over /proc", (mount("shared", "/proc"),), "extras.storages[0].mountPath", "under /proc"),
    Refused("two storages at one path", (mount("shared", "/data"), mount("ro", "/data/", "extras.storages[1]")),
            "extras.storages[1].mountPath", "already the mount path of storage 'shared'"),
]


@pytest.mark.parametrize("case", REFUSED_CASES, ids=lambda c: c.name)
def test_refused_mounts_name_the_field(case: Refused) -> None:
    with pytest.raises(InvalidParametersError) as e:
        resolve_mounts(case.requested, STORAGES, frozenset({"default"}), "alice")
    assert e.value.field == case.field
    assert e.value.message.startswith(case.field + ": ") and case.says in e.value.message


@pytest.mark.parametrize("path", ["/mnt/data", "/data", "/pain", "/mnt/a b"])
def test_ordinary_mount_paths_are_fine(path: str) -> None:
    assert mount_path_problem(path) is None
