"""A stand-in for HDFS (HDFS itself cannot run here): a namenode and a datanode speaking WebHDFS as the Hadoop
WebHDFS REST reference describes it, over a local directory that plays the HDFS namespace.

Namenode (``/webhdfs/v1/<path>?op=...``): GETFILESTATUS, LISTSTATUS, GETCONTENTSUMMARY, and OPEN, which answers
307 with a ``Location`` on the datanode, as a real namenode does. The datanode serves the bytes (offset,
length). Errors are ``RemoteException`` bodies (404 FileNotFoundException). Symbolic links in the directory
show as ``SYMLINK``. Every request is recorded, so that tests can tell what was read.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

PREFIX = "/webhdfs/v1"


@dataclass
class WebHdfs:
    root: Path
    namenode: str = ""  # http://127.0.0.1:port
    datanode: str = ""
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (server, op, path)

    def reads(self) -> list[str]:
        return [path for server, op, path in self.requests if server == "datanode" and op == "OPEN"]


def _status(path: Path, suffix: str) -> dict[str, Any]:
    st = path.lstat()
    kind = "SYMLINK" if stat.S_ISLNK(st.st_mode) else "DIRECTORY" if stat.S_ISDIR(st.st_mode) else "FILE"
    return {"accessTime": int(st.st_atime * 1000), "blockSize": 134217728, "childrenNum":
            len(list(path.iterdir())) if kind == "DIRECTORY" else 0, "fileId": st.st_ino, "group": "supergroup",
            "length": st.st_size if kind == "FILE" else 0, "modificationTime": int(st.st_mtime * 1000),
            "owner": "hdfs", "pathSuffix": suffix, "permission": f"{stat.S_IMODE(st.st_mode):o}",
            "replication": 3 if kind == "FILE" else 0, "storagePolicy": 0, "type": kind}


def _handler(fs: WebHdfs, role: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _json(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _missing(self, hdfs_path: str) -> None:
            self._json(404, {"RemoteException": {"exception": "FileNotFoundException", "javaClassName":
                                                 "java.io.FileNotFoundException",
                                                 "message": f"File does not exist: {hdfs_path}"}})

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if not url.path.startswith(PREFIX):
                self._json(400, {"RemoteException": {"exception": "IllegalArgumentException",
                                                     "message": f"not a WebHDFS path: {url.path}"}})
                return
            hdfs_path = unquote(url.path[len(PREFIX):]) or "/"
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            op = query.get("op", "").upper()
            fs.requests.append((role, op, hdfs_path))
            local = fs.root / hdfs_path.lstrip("/")
            if ".." in Path(hdfs_path).parts or not os.path.lexists(local):
                self._missing(hdfs_path)
            elif role == "datanode":
                self._data(local, query)
            elif op == "GETFILESTATUS":
                self._json(200, {"FileStatus": _status(local, "")})
            elif op == "LISTSTATUS":
                entries = [local] if not local.is_dir() else sorted(local.iterdir())
                self._json(200, {"FileStatuses": {"FileStatus": [
                    _status(p, "" if p == local else p.name) for p in entries]}})
            elif op == "GETCONTENTSUMMARY":
                files = [p for p in local.rglob("*") if p.is_file() and not p.is_symlink()]
                self._json(200, {"ContentSummary": {"directoryCount": sum(1 for p in local.rglob("*") if p.is_dir())
                                                    + 1, "fileCount": len(files), "length":
                                                    sum(p.stat().st_size for p in files), "quota": -1,
                                                    "spaceConsumed": 0, "spaceQuota": -1}})
            elif op == "OPEN":  # the namenode sends the client to a datanode that holds the blocks
                self.send_response(307)
                self.send_header("Location", f"{fs.datanode}{PREFIX}{quote(hdfs_path)}?{url.query}")
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._json(400, {"RemoteException": {"exception": "UnsupportedOperationException",
                                                     "message": f"op={op} is not supported"}})

        def _data(self, local: Path, query: dict[str, str]) -> None:
            data = local.read_bytes()
            offset = int(query.get("offset", "0"))
            length = int(query["length"]) if "length" in query else len(data) - offset
            chunk = data[offset:offset + length]
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(chunk)))
            self.end_headers()
            self.wfile.write(chunk)

    return Handler


@contextmanager
def webhdfs(root: Path) -> Iterator[WebHdfs]:
    """A namenode and a datanode on loopback ports, serving ``root``."""
    fs = WebHdfs(root)
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _handler(fs, role)) for role in ("namenode", "datanode")]
    fs.namenode, fs.datanode = (f"http://127.0.0.1:{s.server_address[1]}" for s in servers)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for t in threads:
        t.start()
    try:
        yield fs
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
