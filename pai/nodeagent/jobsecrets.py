"""A job's v2 ``secrets`` as files in its tasks, where OpenPAI puts them.

OpenPAI (``src/rest-server/src/models/v2/job/k8s.js``) mounts one Kubernetes secret, ``secrets.yaml`` (the job's
``secrets`` as YAML), at ``/usr/local/pai/secrets`` in every task of a job that has ``secrets``; its runtime
(openpai-runtime ``src/init``) calls that directory ``PAI_SECRET_DIR`` and reads the file from there. pai writes the
same ``secrets.yaml`` and, for each secret whose name is a plain file name, a file of that name holding the value
(text as written, other values as JSON), in the attempt's directory (``secrets/``, mode 0700, files 0600). The
docker runtime binds it read-only at ``/usr/local/pai/secrets``; the process runtime leaves it where it is. Both
set ``PAI_SECRET_DIR`` to where the task finds it. It is removed when the attempt ends.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

CONTAINER_DIR = "/usr/local/pai/secrets"
ENV = "PAI_SECRET_DIR"
FILE = "secrets.yaml"
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,254}")


def directory(workdir: Path) -> Path:
    return workdir / "secrets"


def write(workdir: Path, secrets: Mapping[str, Any]) -> Path:
    """Write the files (again, if an earlier start left some); their directory."""
    target = directory(workdir)
    remove(workdir)
    target.mkdir(mode=0o700, parents=True)
    _write(target / FILE, yaml.safe_dump(dict(secrets), sort_keys=False, allow_unicode=True))
    for key, value in secrets.items():
        if isinstance(key, str) and _PLAIN.fullmatch(key) and key != FILE:
            _write(target / key, value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))
    return target


def remove(workdir: Path) -> None:
    """Remove an attempt's secrets, if any (a workdir that is not an absolute path is left alone)."""
    if workdir.is_absolute():
        shutil.rmtree(directory(workdir), ignore_errors=True)


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
