"""Which master the agent talks to (issue 27: agents follow the leader). Pure: no I/O, no clock.

The agent knows a list of masters (``pai agent --master URL1,URL2``) and talks to one at a time, the *current*
one. Only the leader (the master whose launcher holds the lease) serves agents; a standby answers 503
``NotLeaderError`` with the leader's URL, or ``null`` while no master leads. :meth:`Masters.after` says where the
agent goes next, as a table of what went wrong:

====================================  ======================================================  ===========
what the current master did           where the agent goes                                    when
====================================  ======================================================  ===========
named a leader (not itself)           that leader (added to the list when it is not there)    at once [1]
named no leader, itself, or a leader  the next URL of the list (round robin) [2]              after backoff
unreachable since the last answer
could not be reached                  the next URL of the list [2] after it, or, for a leader  after backoff
                                      it was sent to, after the master that named it
====================================  ======================================================  ===========

[1] Following a name again before any master has answered (two standbys naming each other from a stale lease)
waits for the backoff like the others, so that the agent never spins.
[2] Skipping the URLs that could not be reached since the last answer, unless every one of them could not. A frozen
master (SIGSTOP, a VM paused) accepts connections and never answers, so each try costs a whole request timeout: the
agent must not spend its fencing window on it again and again while a standby still names it from its unexpired
lease.

A move changes only where requests go: the agent keeps its tasks and its fencing timer, which only a real answer
of a master renews (``Agent._apply``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Reason(enum.StrEnum):
    """Why the agent moved to another master (the ``reason=`` of the ``following master`` log line)."""

    NAMED_LEADER = "named-leader"  # a standby named the leader
    NO_LEADER = "no-leader"  # a standby knew of no leader
    UNREACHABLE = "unreachable"  # the master could not be reached, or did not answer in time


@dataclass(frozen=True, slots=True)
class Move:
    url: str  # the master to talk to now (the same one when the list has only it)
    reason: Reason
    at_once: bool  # False: wait for the backoff first


def parse_urls(text: str) -> tuple[str, ...]:
    """``URL1,URL2,...`` → the URLs, each without a trailing ``/``, blanks and repeats left out, order kept.
    Raises ValueError when none is left."""
    urls = dict.fromkeys(u.strip().rstrip("/") for u in text.split(","))
    urls.pop("", None)
    if not urls:
        raise ValueError(f"no master URL in {text!r}")
    return tuple(urls)


class Masters:
    """The known masters and the current one."""

    def __init__(self, urls: tuple[str, ...]) -> None:
        if not urls:
            raise ValueError("an agent needs at least one master URL")
        self.urls = list(urls)
        self._index = 0
        self._named_since_answer = False  # a named leader was followed and no master has answered since
        self._origin: int | None = None  # the index of the master that named the current one
        self._unreachable: set[str] = set()  # the URLs that could not be reached since the last answer

    @property
    def current(self) -> str:
        return self.urls[self._index]

    def answered(self) -> None:
        """The current master answered as the leader."""
        self._named_since_answer = False
        self._unreachable.clear()

    def after(self, *, unreachable: bool = False, leader: str | None = None) -> Move:
        """Where to go after the current master was ``unreachable`` or answered NotLeaderError naming ``leader``."""
        named = None if unreachable or leader is None else leader.strip().rstrip("/") or None
        if named is not None and named != self.current and named not in self._unreachable:
            if named not in self.urls:
                self.urls.append(named)
            self._origin, self._index = self._index, self.urls.index(named)
            at_once, self._named_since_answer = not self._named_since_answer, True
            return Move(named, Reason.NAMED_LEADER, at_once)
        start = self._index
        if unreachable:
            self._unreachable.add(self.current)
            start = self._index if self._origin is None else self._origin
        self._origin, self._index = None, self._next(start)
        return Move(self.current, Reason.UNREACHABLE if unreachable else Reason.NO_LEADER, False)

    def _next(self, start: int) -> int:
        """The index of the first URL after ``start`` that was not unreachable since the last answer (round robin);
        when every one was, the one after ``start``."""
        n = len(self.urls)
        for step in range(1, n + 1):
            if self.urls[(start + step) % n] not in self._unreachable:
                return (start + step) % n
        return (start + 1) % n
