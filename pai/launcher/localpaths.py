"""The cluster's ``localPaths`` section and the check of a job's local paths against it (``pai.domain.localpaths``):
at submission (a 400 naming the field) and in every start command, which carries the roots as they are then."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from pai.domain.errors import InvalidParametersError, InvalidProtocolError
from pai.domain.jobspec import JobSpec
from pai.domain.localpaths import LocalRoot, Protected, local_part, path_problem, roots_open_to
from pai.domain.pathvars import PATH_FIELDS
from pai.store.records import User

SECTION = "localPaths"


def parse(section: Sequence[Mapping[str, Any]] | None) -> tuple[LocalRoot, ...]:
    """A schema-valid ``localPaths`` section; a root with a ``..`` component or listed twice is an error."""
    out: list[LocalRoot] = []
    for i, d in enumerate(section or ()):
        path, field = str(d["path"]), f"{SECTION}[{i}].path"
        if ".." in path.split("/"):
            raise InvalidParametersError(f"{field}: {path!r}: '..' is not allowed", field=field)
        if any(r.path == path for r in out):
            raise InvalidParametersError(f"{field}: {path!r} is listed twice", field=field)
        out.append(LocalRoot(path, tuple(d.get("groups") or ())))
    return tuple(out)


def roots_for(roots: Sequence[LocalRoot], user: User | None) -> tuple[str, ...]:
    """The roots ``user`` may name paths under now (a user who is gone: those open to everyone)."""
    if user is None:
        return roots_open_to(roots, ())
    return roots_open_to(roots, user.groups, admin=user.admin)


def require_allowed(spec: JobSpec, roots: Sequence[str], guarded: Sequence[Protected]) -> None:
    """Every local path of ``spec`` under ``roots`` and off ``guarded``, resolved on this machine; else an
    InvalidProtocolError naming the field and the rule."""
    for attr, field in PATH_FIELDS.items():
        value: str = getattr(spec, attr)
        problem = path_problem(value, roots, guarded, os.path.realpath)
        if problem is not None:
            raise InvalidProtocolError(f"{field}: {value!r}: {problem}", field=field)


def is_local(code_dir: str) -> bool:
    return local_part(code_dir) is not None
