"""Field paths as users read them: ``taskRoles[0].gpuNumber``, ``taskRoles.worker.commands[1]``."""

from __future__ import annotations

from collections.abc import Iterable


def join_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def format_path(parts: Iterable[str | int]) -> str:
    path = ""
    for part in parts:
        path = join_path(path, part)
    return path
