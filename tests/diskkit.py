"""Sick disks for the tests: a small tmpfs that a task can fill (ENOSPC), and a directory made read-only (EROFS).

Both need root (``mount``). Where the tests do not run as root (a developer's machine) they are skipped with
that reason; under CI=true they fail instead, as the docker tests do (tests/dockerkit.py).

A read-only work directory is a read-only bind mount of the directory onto itself: every path looked up after
it is read-only (EROFS), as for a file system the kernel remounted read-only, while the files the tasks hold
open keep working (a plain ``mount -o remount,ro`` of a file system with files open for writing is refused:
EBUSY).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def missing() -> str | None:
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "mount(8) is not installed"
    return None


def require_mount() -> None:
    reason = missing()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


@contextmanager
def small_disk(path: Path, size_mb: int) -> Iterator[Path]:
    """A tmpfs of ``size_mb`` MB mounted at ``path`` (made if missing); unmounted at the end."""
    require_mount()
    path.mkdir(parents=True, exist_ok=True)
    _run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(path))
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


@contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` read-only from now on (a read-only bind mount over it); writable again at the end."""
    require_mount()
    _run("mount", "--bind", str(path), str(path))
    try:
        _run("mount", "-o", "remount,ro,bind", str(path))
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def fill(path: Path, name: str = "filler") -> Path:
    """Fill the disk of ``path`` with one file (until ENOSPC); the file."""
    target = path / name
    block = b"\0" * (1 << 20)
    with open(target, "ab", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError:
            pass
    try:
        with open(target, "ab", buffering=0) as f:  # the last partial pages
            while f.write(b"\0" * 4096):
                pass
    except OSError:
        pass
    return target
