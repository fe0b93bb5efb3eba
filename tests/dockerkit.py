"""A real Docker Engine for the tests: ``dockerd`` on a private socket (vfs storage, no iptables, no bridge)
and a small image built with ``docker import`` from Debian's busybox-static (no registry is reachable).

``scripts/test.sh`` installs Debian's docker.io and busybox-static. Where they are absent (a developer's
machine without root) the docker tests are skipped with that reason; under CI=true they fail instead.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
import pytest

IMAGE = "pai-test/busybox:1"
APPLETS = ("sh", "echo", "sleep", "cat", "ls", "env", "dd", "head", "tail", "true", "false", "kill", "id", "df",
           "mount", "pwd", "touch", "grep", "wc", "date", "trap", "printf", "stty", "setsid")


def missing() -> str | None:
    for tool in ("dockerd", "containerd", "runc", "busybox"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: run scripts/test.sh as root (it installs docker.io and busybox-static)"
    if os.geteuid() != 0:
        return "dockerd needs root"
    return None


def require_engine() -> None:
    reason = missing()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def busybox_rootfs() -> bytes:
    """A tar of a root file system holding busybox-static and its applets."""
    buf = io.BytesIO()
    busybox = shutil.which("busybox")
    assert busybox is not None
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "tmp", "dev", "proc", "sys", "etc"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, "bin/busybox")
        for applet in APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
    return buf.getvalue()


@contextmanager
def docker_engine() -> Iterator[str]:
    """Start dockerd, import the test image; yields the engine's base URL (``unix://...``)."""
    root = Path(tempfile.mkdtemp(prefix="pai-dockerd-"))
    sock = root / "docker.sock"
    log = (root / "dockerd.log").open("wb")
    proc = subprocess.Popen(
        ["dockerd", "--data-root", str(root / "data"), "--exec-root", str(root / "exec"), "--pidfile",
         str(root / "dockerd.pid"), "--storage-driver=vfs", "--iptables=false", "--ip6tables=false",
         "--bridge=none", "-H", f"unix://{sock}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"unix://{sock}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"dockerd exited {proc.returncode}: {(root / 'dockerd.log').read_text()[-2000:]}")
            try:
                client = docker.DockerClient(base_url=url, timeout=5)
                client.ping()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        client.api.import_image_from_data(busybox_rootfs(), repository=IMAGE.split(":")[0], tag=IMAGE.split(":")[1])
        client.close()
        yield url
    finally:
        with contextlib.suppress(Exception):  # nothing may outlive the engine's test run
            cleanup = docker.DockerClient(base_url=url, timeout=10)
            for container in cleanup.containers.list(all=True):
                container.remove(force=True)
            cleanup.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def containers_labelled(url: str, label: str) -> list[str]:
    """Ids of the engine's containers with ``label`` (``key=value``), running or not. The low-level list:
    a runtime may remove one while we look."""
    client = docker.DockerClient(base_url=url)
    try:
        return [c["Id"] for c in client.api.containers(all=True, filters={"label": label})]
    finally:
        client.close()
