"""Rules a JSON Schema cannot state, shared by both protocols."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pai.domain.codedir import CodeDirError, parse_code_dir
from pai.domain.errors import InvalidProtocolError
from pai.domain.pathvars import with_stand_ins

MAX_PORT = 65_535


def require_unique(names: Iterable[tuple[str, str]], what: str) -> None:
    """``names`` is ``(field path, name)`` pairs; the second use of a name is the error."""
    seen: set[str] = set()
    for path, name in names:
        if name in seen:
            raise InvalidProtocolError(f"{path}: duplicate {what} {name!r}", field=path)
        seen.add(name)


def require_shm_within_memory(path: str, shm_mb: int, memory_mb: int) -> None:
    if shm_mb > memory_mb:
        raise InvalidProtocolError(f"{path}: {shm_mb} is greater than memoryMB {memory_mb}", field=path)


def require_port_range(path: str, begin_at: int, count: int) -> None:
    """Ports ``beginAt .. beginAt + portNumber - 1`` must all be ports (at most 65535); ``beginAt`` 0: any."""
    if begin_at > 0 and begin_at + count - 1 > MAX_PORT:
        raise InvalidProtocolError(
            f"{path}: ports {begin_at}..{begin_at + count - 1} go past the last port {MAX_PORT}", field=path
        )


def require_code_dir(path: str, value: str) -> None:
    """The codeDir rule (:mod:`pai.domain.codedir`) at submission, so that a bad one is a 400, not a failed task;
    OpenPAI's ``$PAI_DEFAULT_FS_URI`` and ``$PAI_USER_NAME`` count as what they will be replaced with."""
    if not value:
        return
    try:
        parse_code_dir(with_stand_ins(value))
    except CodeDirError as e:
        raise InvalidProtocolError(f"{path}: {value!r}: {e.rule}", field=path) from None


def whole(value: Any) -> int:
    """A schema-checked integer as an ``int``: JSON Schema's ``integer`` also admits ``2.0``."""
    return int(value)


def whole_or_none(value: Any) -> int | None:
    return None if value is None else int(value)
