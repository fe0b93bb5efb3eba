"""codeDir from HDFS: the real ``hdfs`` client against the WebHDFS stand-in (tests/webhdfs.py), with the
namenode's 307 redirect to a datanode."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai.nodeagent.codefetch import CodeFetcher
from pai.nodeagent.codefetch_model import CodeFetchError
from pai.nodeagent.hdfs_source import webhdfs_address
from pai.protocol import PlatformExit
from tests.webhdfs import WebHdfs, webhdfs


@pytest.fixture
def hdfs(tmp_path: Path) -> Iterator[WebHdfs]:
    root = tmp_path / "hdfs"
    code = root / "user" / "alice" / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "train.py").write_text("print('hi')\n")
    (code / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(code / "run.sh", 0o755)
    (code / "pkg" / "model.py").write_bytes(b"W = 1\n" * 1000)
    (root / "user" / "alice" / "a-file").write_text("not a directory\n")
    with webhdfs(root) as fs:
        yield fs


def hdfs_url(fs: WebHdfs, path: str) -> str:
    return f"hdfs://namenode.example:9000{path}"


@pytest.mark.parametrize(("code_dir", "webhdfs", "address"), [
    pytest.param("hdfs://nn.example:9000/code", "", ("http://nn.example:9870", "/code"), id="default-port"),
    pytest.param("hdfs://nn.example:9000/code", "http://web.example:50070/", ("http://web.example:50070", "/code"),
                 id="configured"),
    pytest.param("webhdfs://nn.example:50070/a%20b", "", ("http://nn.example:50070", "/a b"), id="webhdfs-url"),
])
def test_the_webhdfs_address_of_a_code_dir(code_dir: str, webhdfs: str, address: tuple[str, str]) -> None:
    assert webhdfs_address(code_dir, webhdfs) == address


def test_a_code_dir_on_hdfs_is_copied_through_the_datanode_once_per_version(hdfs: WebHdfs, tmp_path: Path) -> None:
    fetcher = CodeFetcher(tmp_path / "cache")
    code_dir = hdfs_url(hdfs, "/user/alice/code")
    first = fetcher.fetch(code_dir, tmp_path / "t0", webhdfs=hdfs.namenode)
    assert (first.files, first.bytes, first.cached) == (3, 6000 + 12 + 19, False)
    assert (tmp_path / "t0" / "train.py").read_text() == "print('hi')\n"
    assert (tmp_path / "t0" / "pkg" / "model.py").read_bytes() == b"W = 1\n" * 1000
    assert os.stat(tmp_path / "t0" / "run.sh").st_mode & 0o111
    assert sorted(hdfs.reads()) == ["/user/alice/code/pkg/model.py", "/user/alice/code/run.sh",
                                    "/user/alice/code/train.py"]  # each file read from the datanode
    second = fetcher.fetch(code_dir, tmp_path / "t1", webhdfs=hdfs.namenode)
    assert second.cached and len(hdfs.reads()) == 3  # the other instance on this node: no read
    assert (tmp_path / "t1" / "train.py").read_text() == "print('hi')\n"


def test_a_webhdfs_url_names_the_namenode_itself(hdfs: WebHdfs, tmp_path: Path) -> None:
    url = hdfs.namenode.replace("http://", "webhdfs://") + "/user/alice/code"
    assert CodeFetcher(None).fetch(url, tmp_path / "t").files == 3


def test_links_are_refused(hdfs: WebHdfs, tmp_path: Path) -> None:
    os.symlink("/etc/passwd", hdfs.root / "user" / "alice" / "code" / "escape")
    with pytest.raises(CodeFetchError) as e:
        CodeFetcher(None).fetch(hdfs_url(hdfs, "/user/alice/code"), tmp_path / "t", webhdfs=hdfs.namenode)
    assert e.value.exit_code is PlatformExit.CODE_DIR_INVALID and "escape is a symlink" in e.value.message


@pytest.mark.parametrize(("path", "max_bytes", "code", "words"), [
    pytest.param("/user/alice/missing", 1 << 20, PlatformExit.CODE_DIR_MISSING, "does not exist on HDFS",
                 id="missing"),
    pytest.param("/user/alice/a-file", 1 << 20, PlatformExit.CODE_DIR_MISSING, "is not a directory", id="a-file"),
    pytest.param("/user/alice/code", 5000, PlatformExit.CODE_DIR_TOO_LARGE, "larger than the limit of 5000",
                 id="too-large"),
])
def test_user_errors(hdfs: WebHdfs, tmp_path: Path, path: str, max_bytes: int, code: PlatformExit,
                     words: str) -> None:
    with pytest.raises(CodeFetchError) as e:
        CodeFetcher(None, max_bytes).fetch(hdfs_url(hdfs, path), tmp_path / "t", webhdfs=hdfs.namenode)
    assert e.value.exit_code is code and words in e.value.message and path in e.value.message
    assert hdfs.reads() == []  # refused from the listing, before any byte was read


def test_a_namenode_that_cannot_be_reached_is_a_platform_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(CodeFetchError) as e:
        CodeFetcher(None).fetch("hdfs://nn:9000/code", tmp_path / "t", webhdfs=f"http://127.0.0.1:{port}")
    assert e.value.exit_code is PlatformExit.CODE_DIR_UNAVAILABLE and "cannot be reached" in e.value.message
