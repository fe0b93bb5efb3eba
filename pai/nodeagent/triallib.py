"""What a task needs to talk to the master as a trial of an experiment (issue 29): the master's URL, and ``pai_trial``.

- ``PAI_MASTER_URL``: every task gets the base URL of the master the agent follows when the task starts
  (:func:`with_master_url`, applied once by the Supervisor), unless its start command sets it. Containers run on the
  host network, so the agent's URL works inside them too.
- ``pai_trial``: a task of a trial (``PAI_TRIAL_ID`` in its start command's environment) can ``import pai_trial``,
  the standard-library client shipped in pai's wheel. The agent copies the package's ``.py`` files, and nothing
  else, into a directory of its own, ``<work-dir>/python/<digest>/pai_trial/`` (:class:`TrialLib`; the digest is
  the files' content, so an upgraded agent writes a new directory beside the one its predecessor's tasks may still
  use; each is written under a temporary name and renamed into place, and a few KB). The process runtime puts that
  directory first on the task's ``PYTHONPATH``; the docker runtime binds it read-only at ``/usr/local/pai/python``
  (:data:`CONTAINER_DIR`) and puts that first. The job's own ``PYTHONPATH`` (its environment's, else, in a
  container, its image's) follows. The agent's own site-packages never reach a task.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import os
import shutil
import tempfile
import threading
from importlib.resources.abc import Traversable
from pathlib import Path

from pai.protocol import StartTask

MASTER_ENV = "PAI_MASTER_URL"
TRIAL_ENV = "PAI_TRIAL_ID"
ENV = "PYTHONPATH"
PACKAGE = "pai_trial"
CONTAINER_DIR = "/usr/local/pai/python"
_TMP_PREFIX = ".tmp-"


def with_master_url(cmd: StartTask, url: str) -> StartTask:
    """``cmd`` with ``PAI_MASTER_URL=url`` in its environment, unless the environment names it already."""
    if MASTER_ENV in cmd.env:
        return cmd
    return dataclasses.replace(cmd, env={**cmd.env, MASTER_ENV: url})


def is_trial(cmd: StartTask) -> bool:
    """Whether the task is a trial's: its environment names the trial."""
    return bool(cmd.env.get(TRIAL_ENV))


def pythonpath(ours: str, theirs: str | None) -> str:
    """Our directory first, then the job's own ``PYTHONPATH`` when it has one."""
    return os.pathsep.join((ours, theirs)) if theirs else ours


def package_files() -> dict[str, bytes]:
    """The installed ``pai_trial``'s ``.py`` files: path inside the package (``/``-separated) → content."""
    files: dict[str, bytes] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for entry in node.iterdir():
            if entry.is_dir() and entry.name != "__pycache__":
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.is_file() and entry.name.endswith(".py"):
                files[prefix + entry.name] = entry.read_bytes()

    walk(importlib.resources.files(PACKAGE), "")
    return files


def install(root: Path) -> Path:
    """Make sure ``root/<digest>/pai_trial/`` holds the installed package's ``.py`` files; ``root/<digest>``, the
    directory to put on a task's ``PYTHONPATH``. Written under a temporary name, then renamed: a task never sees a
    half copy. Raises OSError (a full or read-only disk)."""
    files = package_files()
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    target = root / digest.hexdigest()[:16]
    if (target / PACKAGE / "__init__.py").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(f"{_TMP_PREFIX}*"):  # left by an agent that died while writing
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=root))
    try:
        for name, content in files.items():
            path = tmp / PACKAGE / name
            path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            path.write_bytes(content)
            path.chmod(0o644)
        tmp.chmod(0o755)  # mkdtemp's is 0700: a container's user other than root must read it
        try:
            tmp.rename(target)
        except OSError:
            if not (target / PACKAGE / "__init__.py").is_file():  # not another writer that was first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class TrialLib:
    """The agent's copy of ``pai_trial`` under ``root`` (``<work-dir>/python``), installed at the first trial's
    start and then known; safe from several threads (the docker runtime starts containers in worker threads)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dir: Path | None = None
        self._lock = threading.Lock()

    def directory(self) -> Path:
        """The directory to put on a trial task's ``PYTHONPATH`` (installed now if need be; OSError if it cannot)."""
        with self._lock:
            if self._dir is None or not self._dir.is_dir():
                self._dir = install(self.root)
            return self._dir

