"""Groups and what they grant, as OpenPAI defines them.

A user belongs to groups; a group's ``extension.acls`` grants: ``admin`` (the cluster's admins are the members of a
group that says so, OpenPAI's ``admingroup``), ``virtualClusters`` (the VCs its members may submit to) and
``storageConfigs`` (the storages they may mount). Every user is in ``default``, which grants the ``default`` VC;
each VC has a group of its own name granting it, created and removed with the VC. This module is the one home of
that rule: ``rights_of`` turns a user's groups into what the user may do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_GROUP = "default"  # every user's; grants the default VC
ADMIN_GROUP = "admingroup"  # OpenPAI's group of the admins
DEFAULT_VC = "default"
BUILT_IN = (DEFAULT_GROUP, ADMIN_GROUP)  # groups the cluster keeps; they cannot be deleted


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    description: str = ""
    external_name: str = ""
    extension: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def acls(self) -> Mapping[str, Any]:
        acls = self.extension.get("acls")
        return acls if isinstance(acls, Mapping) else {}

    @property
    def grants_admin(self) -> bool:
        return self.acls.get("admin") is True

    @property
    def virtual_clusters(self) -> tuple[str, ...]:
        return _names(self.acls.get("virtualClusters"))

    @property
    def storage_configs(self) -> tuple[str, ...]:
        return _names(self.acls.get("storageConfigs"))

    @property
    def is_vc_group(self) -> bool:
        """The group of a VC (OpenPAI makes one with each VC): named after it, granting it."""
        return self.name in self.virtual_clusters

    def granting(self, vc: str) -> Group:
        """This group, granting ``vc`` as well."""
        if vc in self.virtual_clusters:
            return self
        acls = {**self.acls, "virtualClusters": [*self.virtual_clusters, vc]}
        return Group(self.name, self.description, self.external_name, {**self.extension, "acls": acls})

    def not_granting(self, vc: str) -> Group:
        acls = {**self.acls, "virtualClusters": [v for v in self.virtual_clusters if v != vc]}
        return Group(self.name, self.description, self.external_name, {**self.extension, "acls": acls})


def _names(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


@dataclass(frozen=True, slots=True)
class Rights:
    """What a user's groups let the user do. An admin may use every VC and storage whatever the lists say."""

    admin: bool = False
    virtual_clusters: frozenset[str] = frozenset()
    storages: frozenset[str] = frozenset()


def rights_of(groups: Iterable[Group]) -> Rights:
    admin = False
    vcs: set[str] = set()
    storages: set[str] = set()
    for g in groups:
        admin = admin or g.grants_admin
        vcs.update(g.virtual_clusters)
        storages.update(g.storage_configs)
    return Rights(admin, frozenset(vcs), frozenset(storages))


def built_in_groups() -> list[Group]:
    return [
        Group(DEFAULT_GROUP, "the group of every user", extension={"acls": {"virtualClusters": [DEFAULT_VC]}}),
        Group(ADMIN_GROUP, "the cluster's admins", extension={"acls": {"admin": True}}),
    ]


def vc_group(vc: str, description: str = "", external_name: str = "") -> Group:
    """The group created with a VC (OpenPAI's): its members may submit to it."""
    return Group(vc, description or f"the users of virtual cluster {vc}", external_name,
                 {"acls": {"virtualClusters": [vc]}})
