"""The cluster's storages (the configuration's ``storages`` section) and a job's mounts resolved against them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy.orm import Session

from pai.domain.errors import InvalidParametersError, NoStorageError
from pai.domain.jobspec import JobSpec
from pai.domain.storage import Storage, resolve_mounts
from pai.store import vcs
from pai.store.records import User

SECTION = "storages"


def parse(section: Sequence[Mapping[str, Any]] | None) -> dict[str, Storage]:
    """A schema-valid ``storages`` section by name; a name listed twice is an error."""
    out: dict[str, Storage] = {}
    for i, d in enumerate(section or ()):
        if d["name"] in out:
            raise InvalidParametersError(f"storages[{i}].name: storage {d['name']!r} is listed twice",
                                         field=f"storages[{i}].name")
        out[d["name"]] = Storage(d["name"], d["path"], bool(d.get("readOnly", False)),
                                 tuple(d.get("groups") or ()), bool(d.get("default", False)))
    return out


def of_cluster(s: Session) -> dict[str, Storage]:
    section: Any = vcs.get_setting(s, SECTION)
    return parse(section)


def usable_by(s: Session, user: User) -> list[Storage]:
    """The storages ``user`` may mount (admins: all), by name."""
    return [st for _, st in sorted(of_cluster(s).items()) if st.open_to(user.groups, user.storages, admin=user.admin)]


def get(s: Session, name: str, user: User) -> Storage:
    """One storage ``user`` may mount; NoStorageError when there is none by that name for them."""
    for st in usable_by(s, user):
        if st.name == name:
            return st
    raise NoStorageError(f"storage {name} not found")


def resolve(s: Session, spec: JobSpec, user: User) -> JobSpec:
    """``spec`` with its mounts checked and given their host paths (InvalidParametersError naming the field)."""
    if not spec.storages:
        return spec
    mounts = resolve_mounts(spec.storages, of_cluster(s), user.groups, user.name, admin=user.admin,
                            granted=user.storages)
    return replace(spec, storages=mounts)
