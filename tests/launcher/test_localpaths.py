"""Where a job's local paths may point, on the master: the configuration's ``localPaths`` checked at submission
(InvalidProtocolError naming the field, nothing stored) and carried, as it stands then, by every start command."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from pai.domain.errors import InvalidParametersError, InvalidProtocolError, NoJobError
from pai.domain.groups import Group
from pai.domain.jobspec import JobSpec, TaskRoleSpec
from pai.domain.resources import Resources
from pai.jobspec.vcconfig import validate_cluster_config
from pai.launcher import cluster
from pai.launcher.service import Launcher, LauncherConfig
from pai.protocol.messages import HeartbeatRequest, NodeInfo, RegisterRequest, StartTask
from pai.store import groups, jobs, users
from pai.store.db import Database
from pai.store.records import User
from tests.launcher.builders import Clock, user

ADMIN = User("root", admin=True, groups=("default", "admingroup"), virtual_clusters=frozenset({"default"}))


@dataclass(frozen=True)
class Place:
    """The directories of one test: a shared root, the master's data directory inside it, a path outside."""

    tmp: Path

    @property
    def shared(self) -> Path:
        return self.tmp / "shared"

    @property
    def master(self) -> Path:
        return self.tmp / "shared" / "master-data"

    @property
    def vision(self) -> Path:
        return self.tmp / "vision"


@pytest.fixture
def place(tmp_path: Path) -> Place:
    p = Place(tmp_path)
    for d in (p.shared / "code", p.master, p.vision / "code", tmp_path / "outside"):
        d.mkdir(parents=True)
    (p.shared / "out-link").symlink_to(tmp_path / "outside")
    return p


def configure(db: Database, section: list[dict[str, Any]] | None) -> None:
    with db.session() as s:
        cluster.apply_file(s, {} if section is None else {"localPaths": section}, 1.0)


def job(**paths: str) -> JobSpec:
    return JobSpec(name="j", task_roles=(TaskRoleSpec("w", 1, "true", Resources(0, 1, 256)),), image="busybox",
                   protocol_version=1, **paths)  # type: ignore[arg-type]


def launcher(db: Database, place: Place) -> Launcher:
    return Launcher(db, LauncherConfig(), clock=Clock(1000.0), protected_paths=(str(place.master),))


def stored(db: Database, key: str) -> bool:
    with db.session() as s:
        try:
            jobs.get_job(s, key)
        except NoJobError:
            return False
    return True


# (field, value with {shared}/{tmp}/{master} filled in, who submits, the localPaths section, the rule's words)
REFUSED = [
    pytest.param("codeDir", "/etc", user(), "open", "is not under a local path this user may use",
                 id="plain path outside the roots"),
    pytest.param("codeDir", "file:///etc", user(), "open", "is not under a local path", id="file URL outside"),
    pytest.param("codeDir", "{shared}/code", user(), None, "localPaths grants none", id="no localPaths section"),
    pytest.param("codeDir", "{shared}/code", user(), "empty", "localPaths grants none", id="an empty section"),
    pytest.param("codeDir", "{shared}/out-link", user(), "open", "(resolved: {tmp}/outside)",
                 id="a symlink that points out"),
    pytest.param("codeDir", "{master}", user(), "open", "overlaps the master's data directory",
                 id="the master's data dir under a root"),
    pytest.param("codeDir", "{shared}", user(), "open", "overlaps the master's data directory",
                 id="a directory holding the master's data dir"),
    pytest.param("codeDir", "/etc", ADMIN, "open", "is not under a local path", id="an admin outside the roots"),
    pytest.param("codeDir", "{master}", ADMIN, "open", "overlaps the master's data directory",
                 id="an admin over the master's data dir"),
    pytest.param("codeDir", "{vision}/code", user(), "groups", "is not under a local path",
                 id="a root of another group"),
    pytest.param("dataDir", "/etc", user(), "open", "is not under a local path", id="dataDir outside"),
    pytest.param("dataDir", "{shared}/../outside", user(), "open", "'..' is not allowed", id="dataDir with dot-dot"),
    pytest.param("dataDir", "data", user(), "open", "must be an absolute path", id="relative dataDir"),
    pytest.param("outputDir", "file:///etc", user(), "open", "is not under a local path", id="outputDir outside"),
]
SECTIONS: dict[str, Any] = {
    "open": lambda p: [{"path": str(p.shared)}],
    "empty": lambda p: [],
    "groups": lambda p: [{"path": str(p.shared)}, {"path": str(p.vision), "groups": ["vision"]}],
}
FIELDS = {"codeDir": "code_dir", "dataDir": "data_dir", "outputDir": "output_dir"}


def fill(text: str, place: Place) -> str:
    return text.format(shared=place.shared, tmp=place.tmp, master=place.master, vision=place.vision)


@pytest.mark.parametrize(("field", "value", "owner", "section", "rule"), REFUSED)
def test_a_local_path_off_the_roots_is_refused_naming_the_field_and_nothing_is_stored(
        db: Database, place: Place, field: str, value: str, owner: User, section: str | None, rule: str) -> None:
    configure(db, None if section is None else SECTIONS[section](place))
    value = fill(value, place)
    with pytest.raises(InvalidProtocolError) as caught:
        launcher(db, place).submit(owner, job(**{FIELDS[field]: value}), "{}")
    assert caught.value.field == field
    assert caught.value.message.startswith(f"{field}: {value!r}: ") and fill(rule, place) in caught.value.message
    assert not stored(db, f"{owner.name}~j")


@pytest.mark.parametrize(("paths", "owner"), [
    pytest.param({"code_dir": "{shared}/code"}, user(), id="a plain path under a root"),
    pytest.param({"code_dir": "file://{shared}/code"}, user(), id="a file URL under a root"),
    pytest.param({"data_dir": "{shared}/data", "output_dir": "{shared}/out"}, user(), id="paths yet to be made"),
    pytest.param({"code_dir": "{vision}/code"}, user("bob", "vision"), id="a root of the user's group"),
    pytest.param({"code_dir": "{vision}/code"}, ADMIN, id="an admin: every root listed"),
    pytest.param({"code_dir": "hdfs://nn:9000/code", "data_dir": "hdfs://nn:9000/data"}, user(),
                 id="HDFS needs no root"),
])
def test_a_local_path_under_a_root_open_to_the_user_is_accepted(db: Database, place: Place, paths: dict[str, str],
                                                                 owner: User) -> None:
    configure(db, SECTIONS["groups"](place))
    spec = job(**{k: fill(v, place) for k, v in paths.items()})
    accepted = launcher(db, place).submit(owner, spec, "{}")
    assert stored(db, accepted.key)


def test_the_start_command_carries_the_roots_as_they_are_when_it_is_sent(db: Database, place: Place) -> None:
    configure(db, SECTIONS["groups"](place))
    with db.session() as s:
        groups.create_group(s, Group("vision"))
        users.create_user(s, "bob", "pw-of-bob", groups=["vision"])
    bob = user("bob", "vision")
    master = launcher(db, place)
    master.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(0, 4, 4096))))
    master.submit(bob, job(code_dir=f"{place.vision}/code"), "{}")
    master.submit(bob, replace(job(code_dir="hdfs://nn:9000/code"), name="on-hdfs"), "{}")
    configure(db, [{"path": str(place.shared)}])  # the vision root is gone before the job starts
    master.clusters.invalidate()
    master.schedule_pass()
    starts = {c.job_key: c for c in master.heartbeat(HeartbeatRequest("n1")).commands if isinstance(c, StartTask)}
    local = starts["bob~j"]
    assert (local.local_roots, local.protected_paths) == ((str(place.shared),), (str(place.master),))
    assert (starts["bob~on-hdfs"].local_roots, starts["bob~on-hdfs"].protected_paths) == ((), ())
    assert StartTask.from_dict(local.to_dict()) == local


@pytest.mark.parametrize(("section", "field", "words"), [
    pytest.param([{"path": "/a/../etc"}], "localPaths[0].path", "'..' is not allowed", id="dot-dot"),
    pytest.param([{"path": "/a"}, {"path": "/a"}], "localPaths[1].path", "listed twice", id="twice"),
])
def test_a_bad_section_is_refused_naming_the_entry(db: Database, section: list[dict[str, Any]], field: str,
                                                   words: str) -> None:
    with pytest.raises(InvalidParametersError) as caught:
        configure(db, section)
    assert caught.value.field == field and words in caught.value.message


@pytest.mark.parametrize(("section", "field"), [
    pytest.param([{"path": "relative"}], "localPaths[0].path", id="relative"),
    pytest.param([{"path": "/a", "readOnly": True}], "localPaths[0].readOnly", id="unknown key"),
    pytest.param({"path": "/a"}, "localPaths", id="not a list"),
])
def test_the_schema_refuses_a_malformed_section(section: Any, field: str) -> None:
    with pytest.raises(InvalidParametersError) as caught:
        validate_cluster_config({"localPaths": section})
    assert caught.value.field == field
