"""A codeDir on HDFS, read over WebHDFS with the ``hdfs`` package.

``hdfs://namenode:port/path`` is read from the namenode's WebHDFS address: the one the master sends with the
start command (cluster configuration), else ``http://namenode:9870`` (Hadoop 3's default namenode HTTP port).
``webhdfs://host:port/path`` names the WebHDFS address itself. The tree is listed first (names, sizes,
times, modes), checked like a local one (size limit; no links, no odd names), then each listed file is read
(the namenode redirects every read to a datanode). A missing directory is a user error; a namenode that
cannot be reached is a platform error, retried (``CODE_DIR_UNAVAILABLE``).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import requests
from hdfs import InsecureClient
from hdfs.util import HdfsError

from pai.domain.codedir import parse_code_dir
from pai.nodeagent.codefetch_model import CodeFetchError, Entry, EntryKind, Manifest
from pai.protocol import PlatformExit

DEFAULT_WEBHDFS_PORT = 9870
TIMEOUT_SECONDS = 30.0
_CHUNK = 1 << 16


def webhdfs_address(code_dir: str, webhdfs: str = "") -> tuple[str, str]:
    """The WebHDFS base URL and the HDFS path of an ``hdfs://`` or ``webhdfs://`` codeDir."""
    parsed = parse_code_dir(code_dir)
    if parsed.scheme == "webhdfs":
        return f"http://{parsed.netloc}", parsed.path
    if webhdfs:
        return webhdfs.rstrip("/"), parsed.path
    host = parsed.netloc.rsplit(":", 1)[0] if not parsed.netloc.endswith("]") else parsed.netloc
    return f"http://{host}:{DEFAULT_WEBHDFS_PORT}", parsed.path


class HdfsSource:
    def __init__(self, code_dir: str, webhdfs: str = "", timeout: float = TIMEOUT_SECONDS) -> None:
        self.code_dir = code_dir
        self.url, self.path = webhdfs_address(code_dir, webhdfs)
        self._client = InsecureClient(self.url, timeout=timeout)

    def _fail(self, code: PlatformExit, message: str) -> CodeFetchError:
        return CodeFetchError(code, f"codeDir {self.code_dir}: {message}", source=self.code_dir)

    def manifest(self, max_bytes: int) -> Manifest:
        """List the tree (status only), refusing links, odd names and anything past ``max_bytes``."""
        try:
            status = self._client.status(self.path, strict=False)
            if status is None:
                raise self._fail(PlatformExit.CODE_DIR_MISSING, "does not exist on HDFS")
            if status["type"] != "DIRECTORY":
                raise self._fail(PlatformExit.CODE_DIR_MISSING, "is not a directory")
            entries: list[Entry] = []
            self._walk(self.path, "", entries, max_bytes)
        except requests.RequestException as e:
            raise self._fail(PlatformExit.CODE_DIR_UNAVAILABLE, f"WebHDFS at {self.url} cannot be reached: "
                                                                f"{type(e).__name__}") from None
        except HdfsError as e:
            raise self._fail(PlatformExit.CODE_DIR_MISSING, f"cannot be read: {e.message}") from None
        return Manifest(Path("/hdfs") / self.url.split("://", 1)[1] / self.path.lstrip("/"), tuple(entries))

    def _walk(self, path: str, rel: str, entries: list[Entry], max_bytes: int) -> None:
        for name, st in sorted(self._client.list(path, status=True)):
            if not name or "/" in name or name in (".", ".."):
                raise self._fail(PlatformExit.CODE_DIR_INVALID, f"{rel}{name!r} is not a plain name")
            child_rel = f"{rel}{name}"
            mode = int(st.get("permission", "644"), 8)
            if st["type"] == "DIRECTORY":
                entries.append(Entry(child_rel, EntryKind.DIR, mode=mode | 0o700))
                self._walk(f"{path.rstrip('/')}/{name}", f"{child_rel}/", entries, max_bytes)
            elif st["type"] == "FILE":
                entries.append(Entry(child_rel, EntryKind.FILE, int(st["length"]),
                                     int(st["modificationTime"]) * 1_000_000, mode | 0o600))
                if sum(e.size for e in entries) > max_bytes:
                    raise self._fail(PlatformExit.CODE_DIR_TOO_LARGE, f"is larger than the limit of {max_bytes} bytes")
            else:
                raise self._fail(PlatformExit.CODE_DIR_INVALID, f"{child_rel} is a {st['type'].lower()}, "
                                                                "not a file or directory")

    def download(self, manifest: Manifest, dest: Path, max_bytes: int) -> None:
        """Make ``dest`` hold what ``manifest`` lists, reading each file from HDFS."""
        dest.mkdir(parents=True)
        copied = 0
        try:
            for e in manifest.entries:
                target = dest / PurePosixPath(e.rel)
                if e.kind is EntryKind.DIR:
                    target.mkdir()
                    continue
                with self._client.read(f"{self.path.rstrip('/')}/{e.rel}", chunk_size=_CHUNK) as reader, \
                        open(target, "wb") as out:
                    for chunk in reader:
                        copied += len(chunk)
                        if copied > max_bytes:
                            raise self._fail(PlatformExit.CODE_DIR_TOO_LARGE,
                                             f"grew past the limit of {max_bytes} bytes while read")
                        out.write(chunk)
                target.chmod(e.mode)
        except requests.RequestException as e:
            raise self._fail(PlatformExit.CODE_DIR_UNAVAILABLE, f"WebHDFS at {self.url} failed while read: "
                                                                f"{type(e).__name__}") from None
        except HdfsError as e:
            raise self._fail(PlatformExit.CODE_DIR_MISSING, f"changed while read: {e.message}") from None
