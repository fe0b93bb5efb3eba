"""The local-path rule (pai.domain.localpaths) as a table: where a codeDir, dataDir or outputDir may point, with the
links of an imagined node resolved by a stand-in for ``os.path.realpath``."""

from __future__ import annotations

import posixpath

import pytest

from pai.domain.localpaths import LocalRoot, Protected, local_part, path_problem, roots_open_to

# The node's links: /shared/etc-link -> /etc, /mnt/data -> /srv/data (a root reached through a link),
# /shared/inner -> /shared/code (a link that stays inside).
LINKS = {"/shared/etc-link": "/etc", "/mnt/data": "/srv/data", "/shared/inner": "/shared/code"}
WORK_DIR = Protected("/shared/agent", "the node agent's work directory")
MASTER = Protected("/var/lib/pai", "the master's data directory")


def realpath(path: str) -> str:
    """Resolve ``path`` against LINKS, component by component, as os.path.realpath does."""
    out = "/"
    for part in posixpath.normpath(path).split("/"):
        out = posixpath.join(out, part) if part else out
        while out in LINKS:
            out = LINKS[out]
    return out


ROOTS = ("/shared", "/mnt/data")
CASES = [
    # (value, roots, protected, the problem's words or None)
    pytest.param("", ROOTS, (), None, id="empty: no code"),
    pytest.param("hdfs://nn:9000/code", (), (), None, id="hdfs is not a local path"),
    pytest.param("webhdfs://nn:9870/code", (), (), None, id="webhdfs is not a local path"),
    pytest.param("/shared/code", ROOTS, (WORK_DIR, MASTER), None, id="plain path under a root"),
    pytest.param("file:///shared/code", ROOTS, (), None, id="file URL under a root"),
    pytest.param("file://localhost/shared/my%20code", ROOTS, (), None, id="file URL with localhost, encoded"),
    pytest.param("/shared", ROOTS, (), None, id="the root itself"),
    pytest.param("/mnt/data/set", ROOTS, (), None, id="under a root reached through a link"),
    pytest.param("/srv/data/set", ROOTS, (), None, id="the root's real path"),
    pytest.param("/shared/inner", ROOTS, (), None, id="a link that stays under the root"),
    pytest.param("/shared/code", (), (), "the cluster configuration's localPaths grants none",
                 id="no roots: nothing local"),
    pytest.param("/etc", ROOTS, (), "is not under a local path this user may use", id="outside every root"),
    pytest.param("file:///etc", ROOTS, (), "is not under a local path this user may use", id="file URL outside"),
    pytest.param("/sharedx/code", ROOTS, (), "is not under", id="a sibling with the root's name as prefix"),
    pytest.param("/shared/etc-link", ROOTS, (), "(resolved: /etc)", id="a link pointing out"),
    pytest.param("/shared/etc-link/passwd", ROOTS, (), "(resolved: /etc/passwd)", id="through a link pointing out"),
    pytest.param("/shared/../etc", ROOTS, (), "'..' is not allowed", id="dot-dot"),
    pytest.param("file:///shared/../etc", ROOTS, (), "'..' is not allowed", id="dot-dot in a file URL"),
    pytest.param("shared/code", ROOTS, (), "must be an absolute path", id="relative"),
    pytest.param("file://otherhost/shared", ROOTS, (), "file:// must name a local path", id="another host's file"),
    pytest.param("/shared/agent", ROOTS, (WORK_DIR,), "overlaps the node agent's work directory",
                 id="the agent's work dir under an admin's root"),
    pytest.param("/shared/agent/attempts", ROOTS, (WORK_DIR,), "overlaps the node agent's work directory",
                 id="its attempts folder"),
    pytest.param("/shared", ROOTS, (WORK_DIR,), "overlaps the node agent's work directory",
                 id="a directory holding the work dir"),
    pytest.param("/", ("/",), (MASTER,), "overlaps the master's data directory", id="everything, from a root /"),
    pytest.param("/shared/agentx", ROOTS, (WORK_DIR,), None, id="a sibling of the work dir"),
]


@pytest.mark.parametrize(("value", "roots", "protected", "problem"), CASES)
def test_where_a_local_path_may_point(value: str, roots: tuple[str, ...], protected: tuple[Protected, ...],
                                      problem: str | None) -> None:
    found = path_problem(value, roots, protected, realpath)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found, found


def test_a_refusal_lists_the_users_roots_as_written() -> None:
    assert path_problem("/etc", ROOTS, (), realpath) == (
        "is not under a local path this user may use (localPaths: /shared, /mnt/data)")


@pytest.mark.parametrize(("value", "path"), [
    pytest.param("/a/b", "/a/b", id="plain"),
    pytest.param("rel", "rel", id="relative plain"),
    pytest.param("file:///a%20b", "/a b", id="file URL"),
    pytest.param("hdfs://nn/a", None, id="hdfs"),
    pytest.param("s3://bucket/a", None, id="another scheme"),
    pytest.param("", None, id="empty"),
])
def test_local_part(value: str, path: str | None) -> None:
    assert local_part(value) == path


ROOT_GRANTS = (LocalRoot("/shared"), LocalRoot("/vision", ("vision",)), LocalRoot("/admins", ("admin",)))


@pytest.mark.parametrize(("groups", "admin", "roots"), [
    pytest.param((), False, ("/shared",), id="no group: the open roots"),
    pytest.param(("vision",), False, ("/shared", "/vision"), id="a group's root"),
    pytest.param(("admin",), True, ("/shared", "/vision", "/admins"), id="an admin: every root listed, no more"),
])
def test_roots_open_to(groups: tuple[str, ...], admin: bool, roots: tuple[str, ...]) -> None:
    assert roots_open_to(ROOT_GRANTS, groups, admin=admin) == roots
