"""A real Docker registry (Debian's ``docker-registry``, the CNCF distribution server) with htpasswd auth, on a
free port of 127.0.0.1 (an insecure registry the engine accepts without TLS), for the pull-with-credentials
tests. ``scripts/test.sh`` installs it; where it is absent outside CI the tests that need it are skipped."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

USER = "pai-bot"
PASSWORD = "reg-pass-1"
# ``htpasswd -Bbn pai-bot reg-pass-1``: the registry checks the password against this bcrypt hash.
HTPASSWD = "pai-bot:$2y$05$v76KIUwfkubdMTxi9XIjeOl5DpJqJ.QAfrGcoYcYbnm1EzekqAaBq\n"


@dataclass(frozen=True)
class Registry:
    address: str  # host:port
    root: Path  # its configuration and storage (``data/``): a test may break what it serves


def require_registry() -> None:
    if shutil.which("docker-registry") is None:
        reason = "docker-registry is not installed: run scripts/test.sh as root (it installs it)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def registry() -> Iterator[Registry]:
    root = Path(tempfile.mkdtemp(prefix="pai-registry-"))
    (root / "htpasswd").write_text(HTPASSWD)
    address = f"127.0.0.1:{_free_port()}"
    (root / "config.yml").write_text(
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}}}\n"
        f"http: {{addr: '{address}'}}\n"
        f"auth: {{htpasswd: {{realm: pai-test, path: {root / 'htpasswd'}}}}}\n")
    log = (root / "registry.log").open("wb")
    proc = subprocess.Popen(["docker-registry", "serve", str(root / "config.yml")], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:  # /v2/ answers 401 to a client without credentials once the registry is up
            if proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited: {(root / 'registry.log').read_text()[-2000:]}")
            with contextlib.suppress(requests.ConnectionError):
                if requests.get(f"http://{address}/v2/", timeout=2).status_code == 401:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("docker-registry did not answer within 30 s")
            time.sleep(0.1)
        yield Registry(address, root)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)
