"""Code fetch from a shared file system: copy, limits, escapes, cache, and where a local codeDir may be."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pai.domain.localpaths import AGENT_TOKEN_FILE, AGENT_WORK_DIR, Protected, master_paths
from pai.nodeagent.codefetch import CodeFetcher, resolve_source
from pai.nodeagent.codefetch_model import CodeFetchError
from pai.protocol import PlatformExit


def make_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def tree_of(root: Path) -> dict[str, str]:
    """Every file and link under root: links as '-> target', files by their text."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = path.read_text()
    return out


def roots_of(tmp_path: Path) -> tuple[str]:
    """The localPaths root these tests copy from: the test's own directory."""
    return (str(tmp_path),)


@pytest.fixture
def fetcher(tmp_path: Path) -> CodeFetcher:
    return CodeFetcher(tmp_path / "cache", max_bytes=1000)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "src", {"train.py": "print('hi')\n", "pkg/model.py": "W = 1\n"})


@pytest.mark.parametrize(
    ("code_dir", "path"),
    [
        pytest.param("/shared/code", "/shared/code", id="plain-path"),
        pytest.param("file:///shared/code", "/shared/code", id="file-uri"),
        pytest.param("file://localhost/shared/code", "/shared/code", id="file-uri-localhost"),
        pytest.param("file:///shared/my%20code", "/shared/my code", id="file-uri-percent-encoded"),
    ],
)
def test_resolve_source(code_dir: str, path: str) -> None:
    assert resolve_source(code_dir) == Path(path)


@pytest.mark.parametrize(
    ("code_dir", "message"),
    [
        pytest.param("hdfs://namenode:9000/code", "not a local path", id="hdfs-is-not-local"),
        pytest.param("relative/code", "must be an absolute path", id="relative"),
        pytest.param("/shared/../etc", "'..' is not allowed", id="dotdot"),
        pytest.param("file:///shared/../etc", "'..' is not allowed", id="dotdot-in-uri"),
        pytest.param("s3://bucket/code", "scheme s3:// is not supported", id="other-scheme"),
        pytest.param("file://otherhost/code", "must name a local path", id="remote-file-uri"),
    ],
)
def test_resolve_source_refuses(code_dir: str, message: str) -> None:
    with pytest.raises(CodeFetchError) as e:
        resolve_source(code_dir)
    assert e.value.exit_code is PlatformExit.CODE_DIR_INVALID
    assert message in e.value.message and code_dir in e.value.message


def test_copies_the_tree_with_modes_and_inner_links(fetcher: CodeFetcher, src: Path, tmp_path: Path) -> None:
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    (src / "latest.py").symlink_to("pkg/model.py")
    (src / "pkg" / "up").symlink_to("../train.py")
    (src / "empty").mkdir()
    result = fetcher.fetch(f"file://{src}", tmp_path / "dest", roots=roots_of(tmp_path))
    dest = tmp_path / "dest"
    assert tree_of(dest) == tree_of(src)
    assert (dest / "latest.py").read_text() == "W = 1\n"
    assert os.access(dest / "run.sh", os.X_OK)
    assert (dest / "empty").is_dir()
    assert (result.files, result.bytes) == (3, len("print('hi')\n") + len("W = 1\n") + len("#!/bin/sh\n"))


def test_a_symlinked_source_is_read_through_its_link(fetcher: CodeFetcher, src: Path, tmp_path: Path) -> None:
    (tmp_path / "current").symlink_to(src)
    fetcher.fetch(str(tmp_path / "current"), tmp_path / "dest", roots=roots_of(tmp_path))
    assert tree_of(tmp_path / "dest") == tree_of(src)


@pytest.mark.parametrize(
    ("build", "exit_code", "message"),
    [
        pytest.param(lambda src: None, None, None, id="control-ok"),
        pytest.param(
            lambda src: (src / "passwd").symlink_to("/etc/passwd"),
            PlatformExit.CODE_DIR_INVALID,
            "link passwd points outside",
            id="absolute-link-out",
        ),
        pytest.param(
            lambda src: (src / "pkg" / "up").symlink_to("../../secret"),
            PlatformExit.CODE_DIR_INVALID,
            "link pkg/up points outside",
            id="relative-link-out",
        ),
        pytest.param(
            lambda src: (src / "data").symlink_to("/etc"),
            PlatformExit.CODE_DIR_INVALID,
            "link data points outside",
            id="dir-link-out",
        ),
        pytest.param(
            lambda src: os.mkfifo(src / "pipe"),
            PlatformExit.CODE_DIR_INVALID,
            "pipe is not a file, directory or link",
            id="fifo",
        ),
        pytest.param(
            lambda src: (src / "big.bin").write_bytes(b"x" * 990),
            PlatformExit.CODE_DIR_TOO_LARGE,
            "larger than the limit of 1000 bytes",
            id="too-large",
        ),
    ],
)
def test_refused_trees_copy_nothing(
    fetcher: CodeFetcher,
    src: Path,
    tmp_path: Path,
    build: object,
    exit_code: PlatformExit | None,
    message: str | None,
) -> None:
    (tmp_path / "secret").write_text("s3cr3t")
    build(src)  # type: ignore[operator]
    dest = tmp_path / "dest"
    if exit_code is None:
        fetcher.fetch(str(src), dest, roots=roots_of(tmp_path))
        assert tree_of(dest) == tree_of(src)
        return
    with pytest.raises(CodeFetchError) as e:
        fetcher.fetch(str(src), dest, roots=roots_of(tmp_path))
    assert e.value.exit_code is exit_code
    assert message is not None and message in e.value.message
    assert not dest.exists()


@pytest.mark.parametrize("make", [lambda p: None, lambda p: p.write_text("a file")], ids=["missing", "a-file"])
def test_missing_code_dir(fetcher: CodeFetcher, tmp_path: Path, make: object) -> None:
    make(tmp_path / "nope")  # type: ignore[operator]
    with pytest.raises(CodeFetchError) as e:
        fetcher.fetch(str(tmp_path / "nope"), tmp_path / "dest", roots=roots_of(tmp_path))
    assert e.value.exit_code is PlatformExit.CODE_DIR_MISSING
    assert "does not exist" in e.value.message


def test_second_fetch_comes_from_the_cache_until_the_source_changes(
    fetcher: CodeFetcher, src: Path, tmp_path: Path
) -> None:
    first = fetcher.fetch(str(src), tmp_path / "d1", roots=roots_of(tmp_path))
    second = fetcher.fetch(f"file://{src}", tmp_path / "d2", roots=roots_of(tmp_path))
    assert (first.cached, second.cached) == (False, True)
    assert tree_of(tmp_path / "d2") == tree_of(src)

    (tmp_path / "d2" / "train.py").write_text("a task edits its own copy\n")
    assert tree_of(tmp_path / "d1") == tree_of(src)  # copies do not share files
    third = fetcher.fetch(str(src), tmp_path / "d3", roots=roots_of(tmp_path))
    assert third.cached and tree_of(tmp_path / "d3") == tree_of(src)

    (src / "train.py").write_text("print('v2, longer')\n")
    fourth = fetcher.fetch(str(src), tmp_path / "d4", roots=roots_of(tmp_path))
    assert not fourth.cached
    assert (tmp_path / "d4" / "train.py").read_text() == "print('v2, longer')\n"
    versions = [p for slot in (tmp_path / "cache").iterdir() for p in slot.iterdir()]
    assert len(versions) == 1  # one version per source is kept


def test_without_a_cache_dir_it_copies_directly(src: Path, tmp_path: Path) -> None:
    fetcher = CodeFetcher(None)
    assert not fetcher.fetch(str(src), tmp_path / "d1", roots=roots_of(tmp_path)).cached
    assert not fetcher.fetch(str(src), tmp_path / "d2", roots=roots_of(tmp_path)).cached
    assert tree_of(tmp_path / "d2") == tree_of(src)


# -- where a local codeDir may be (pai.domain.localpaths), checked on the node before anything is read --------------


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """A node's disk: a shared root with code, the agent's work dir holding another job's secret, its token file
    in a keys folder, the master's data dir, a directory outside the root and a link to it from inside."""
    make_tree(tmp_path / "shared" / "code", {"main.py": "print('mine')\n"})
    make_tree(tmp_path / "agent" / "attempts" / "other" / "secrets", {"token": "other job's secret\n"})
    make_tree(tmp_path / "keys", {"agent-token": "t0ken\n"})
    make_tree(tmp_path / "master", {"agent-token": "t0ken\n"})
    make_tree(tmp_path / "outside", {"passwd": "root:x:0:0\n"})
    (tmp_path / "shared" / "out-link").symlink_to(tmp_path / "outside")
    return tmp_path


# (codeDir, the roots the start command carries, the rule's words); {t} is the node's directory
OFF_LIMITS = [
    pytest.param("{t}/outside", ("{t}/shared",), "is not under a local path this user may use",
                 id="plain path outside the roots"),
    pytest.param("file://{t}/outside", ("{t}/shared",), "is not under a local path", id="file URL outside"),
    pytest.param("{t}/shared/out-link", ("{t}/shared",), "(resolved: {t}/outside)", id="a symlink that points out"),
    pytest.param("{t}/shared/code", (), "localPaths grants none", id="the root taken away after submission"),
    pytest.param("{t}/agent", ("{t}",), "overlaps the node agent's work directory", id="the agent's work dir"),
    pytest.param("file://{t}/agent/attempts", ("{t}",), "overlaps the node agent's work directory",
                 id="its attempts folder"),
    pytest.param("{t}", ("{t}",), "overlaps the node agent's work directory", id="a directory holding the work dir"),
    pytest.param("{t}/keys", ("{t}",), "overlaps the node agent's token file", id="a folder holding the token file"),
    pytest.param("{t}/master", ("{t}",), "overlaps the master's data directory", id="the master's data dir"),
]


@pytest.mark.parametrize(("code_dir", "roots", "words"), OFF_LIMITS)
def test_a_code_dir_off_the_roots_or_over_the_platforms_files_is_refused_before_anything_is_read(
        node: Path, code_dir: str, roots: tuple[str, ...], words: str) -> None:
    own = (Protected(str(node / "agent"), AGENT_WORK_DIR),
           Protected(str(node / "keys" / "agent-token"), AGENT_TOKEN_FILE))
    fetcher = CodeFetcher(node / "agent" / "cache" / "code", protected=own)
    code_dir = code_dir.format(t=node)
    dest = node / "agent" / "attempts" / "mine" / "code"
    with pytest.raises(CodeFetchError) as e:
        fetcher.fetch(code_dir, dest, roots=tuple(r.format(t=node) for r in roots),
                      protected=master_paths((str(node / "master"),)))
    assert e.value.exit_code is PlatformExit.LOCAL_PATH_NOT_ALLOWED
    assert e.value.message.startswith(f"codeDir {code_dir}: ") and words.format(t=node) in e.value.message
    assert not dest.exists() and not (node / "agent" / "cache").exists()


def test_a_code_dir_under_a_root_is_copied_and_the_roots_are_resolved(node: Path) -> None:
    (node / "via-link").symlink_to(node / "shared")
    fetcher = CodeFetcher(None, protected=(Protected(str(node / "agent"), AGENT_WORK_DIR),))
    fetcher.fetch(f"{node}/shared/code", node / "d1", roots=(str(node / "via-link"),))
    assert tree_of(node / "d1") == {"main.py": "print('mine')\n"}
