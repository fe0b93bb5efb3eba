"""A node's health problems: words for people, each starting with its kind, which machines read.

An agent reports its node's problems as text (``RegisterRequest.problems``, ``HeartbeatRequest.problems``), and
each text starts with the kind of the problem and a colon: ``"disk full: work directory /var/lib/pai/agent:
0 MB free of 2048 MB"``. The master counts them by kind (its ``pai_node_problems`` metric), and the agent tells
by kind whether its node is *disk-sick* (full or read-only), which makes a task's failure the node's fault. A
text of an older agent, without a known kind, is of kind ``other``.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class ProblemKind(StrEnum):
    DISK_FULL = "disk full"  # the work directory's disk has no space left (or the agent met ENOSPC)
    READ_ONLY = "read-only"  # the work directory cannot be written (EROFS)
    LOW_DISK = "low disk"  # less free than the agent's --min-free-disk-mb: nothing new, but tasks are fine
    DISK_UNREADABLE = "disk unreadable"  # the work directory cannot even be looked at
    ENGINE_DOWN = "engine down"  # the Docker Engine does not answer
    OTHER = "other"

    @property
    def label(self) -> str:
        """The kind as a metric label: ``disk_full``, ``read_only``, ..."""
        return self.value.replace(" ", "_").replace("-", "_")


# The kinds that make a task's failure on the node the node's fault (PlatformExit.NODE_DISK_FULL).
DISK_SICK = frozenset({ProblemKind.DISK_FULL, ProblemKind.READ_ONLY})


def problem(kind: ProblemKind, detail: str) -> str:
    return f"{kind.value}: {detail}"


def kind_of(text: str) -> ProblemKind:
    head, sep, _ = text.partition(":")
    if sep:
        for kind in ProblemKind:
            if head == kind.value:
                return kind
    return ProblemKind.OTHER


def disk_sickness(problems: Iterable[str]) -> str | None:
    """The first problem that makes the node disk-sick, or None."""
    return next((p for p in problems if kind_of(p) in DISK_SICK), None)
