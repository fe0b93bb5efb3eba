"""OpenPAI v0.14's variables in a v1 job's paths, replaced at submission as its REST server replaced them.

``src/rest-server/src/models/v1/job/yarn.js`` (``putJobAsync``) rewrote ``authFile``, ``dataDir``, ``outputDir`` and
``codeDir``: the first ``$PAI_DEFAULT_FS_URI`` became the cluster's HDFS URI, every ``$PAI_JOB_NAME`` the job's
name and every ``$PAI_USER_NAME`` / ``$PAI_USERNAME`` the submitting user's (none followed by a letter, digit or
``_``). OpenPAI's example jobs name their code ``$PAI_DEFAULT_FS_URI/$PAI_USERNAME/examples/...``. Here the job's
name is known when the spec is parsed, the user and the cluster's ``hdfs.defaultFs`` when it is submitted.
"""

from __future__ import annotations

import re
from dataclasses import replace

from pai.domain.errors import InvalidProtocolError
from pai.domain.jobspec import JobSpec

DEFAULT_FS = "$PAI_DEFAULT_FS_URI"
_JOB_NAME = re.compile(r"\$PAI_JOB_NAME(?!\w)")
_USER_NAME = re.compile(r"\$PAI_USER_NAME(?!\w)|\$PAI_USERNAME(?!\w)")
# JobSpec field -> the v1 field it comes from.
PATH_FIELDS = {"code_dir": "codeDir", "data_dir": "dataDir", "output_dir": "outputDir"}
# What the variables stand for while a path is checked at parse time (the real values come at submission).
STAND_INS = ("hdfs://default-fs", "user")


def expand(value: str, *, job_name: str | None = None, user: str | None = None, default_fs: str | None = None) -> str:
    """``value`` with the variables given replaced; the others are left as written."""
    if default_fs is not None:
        value = value.replace(DEFAULT_FS, default_fs.rstrip("/"), 1)
    if job_name is not None:
        value = _JOB_NAME.sub(lambda _: job_name, value)
    if user is not None:
        value = _USER_NAME.sub(lambda _: user, value)
    return value


def with_stand_ins(value: str) -> str:
    """``value`` as it will look once submitted, for checking its shape at parse time."""
    return expand(value, default_fs=STAND_INS[0], user=STAND_INS[1])


def bind(spec: JobSpec, user: str, default_fs: str | None) -> JobSpec:
    """A v1 spec's paths with the user's name and the cluster's default file system in place.

    A path that uses ``$PAI_DEFAULT_FS_URI`` on a cluster without ``hdfs.defaultFs`` is an InvalidProtocolError
    naming the field: the job could not reach it."""
    changes: dict[str, str] = {}
    for attr, field in PATH_FIELDS.items():
        value: str = getattr(spec, attr)
        if DEFAULT_FS in value and default_fs is None:
            raise InvalidProtocolError(
                f"{field}: {value!r} uses {DEFAULT_FS}, and this cluster has no default file system"
                " (hdfs.defaultFs in the cluster configuration)", field=field)
        bound = expand(value, user=user, default_fs=default_fs)
        if bound != value:
            changes[attr] = bound
    return replace(spec, **changes) if changes else spec  # type: ignore[arg-type]
