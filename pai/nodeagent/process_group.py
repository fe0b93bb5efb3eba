"""Process groups seen through /proc (Linux): who is in a group, is a process still the one we started.

Zombies count as gone: they run nothing, and where PID 1 does not reap orphans they would stay forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
POLL_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class ProcStat:
    pid: int
    state: str
    pgid: int
    start_ticks: int
    cpu_ticks: int = 0  # utime + stime, and of its reaped children cutime + cstime (clock ticks)
    rss_pages: int = 0
    ppid: int = 0

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def parse_stat(text: str) -> ProcStat:
    """Parse one /proc/<pid>/stat line (the command name may hold spaces and parentheses)."""
    pid_part, _, rest = text.partition(" (")
    fields = rest.rpartition(") ")[2].split()
    return ProcStat(pid=int(pid_part), state=fields[0], pgid=int(fields[2]), start_ticks=int(fields[19]),
                    cpu_ticks=sum(int(f) for f in fields[11:15]), rss_pages=int(fields[21]), ppid=int(fields[1]))


def read_stat(pid: int) -> ProcStat | None:
    try:
        return parse_stat((PROC / str(pid) / "stat").read_text())
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def is_running(pid: int, start_ticks: int | None) -> bool:
    """True when ``pid`` runs (not a zombie) and is the process that started at ``start_ticks``."""
    st = read_stat(pid)
    return st is not None and st.alive and (start_ticks is None or st.start_ticks == start_ticks)


def group_members(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) processes of process group ``pgid``."""
    return [st.pid for st in group_stats(pgid)]


def group_stats(pgid: int) -> list[ProcStat]:
    """The stat of every live (non-zombie) process of process group ``pgid``."""
    return stats_by_group({pgid}).get(pgid, [])


def stats_by_group(pgids: set[int]) -> dict[int, list[ProcStat]]:
    """The live processes of each of ``pgids``, in one walk of /proc."""
    out: dict[int, list[ProcStat]] = {}
    for st in live_stats():
        if st.pgid in pgids:
            out.setdefault(st.pgid, []).append(st)
    return out


def live_stats() -> list[ProcStat]:
    """Every live (non-zombie) process, from one walk of /proc."""
    stats = (read_stat(int(entry.name)) for entry in PROC.iterdir() if entry.name.isdigit())
    return [st for st in stats if st is not None and st.alive]


def tree(pid: int) -> list[ProcStat]:
    """``pid`` (when it lives) and its live descendants."""
    children: dict[int, list[ProcStat]] = {}
    root = None
    for st in live_stats():
        children.setdefault(st.ppid, []).append(st)
        if st.pid == pid:
            root = st
    out, todo = [], [root] if root is not None else []
    while todo:
        st = todo.pop()
        out.append(st)
        todo.extend(children.get(st.pid, ()))
    return out


def clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def page_size() -> int:
    return os.sysconf("SC_PAGE_SIZE")


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def wait_group_gone(pgid: int) -> None:
    while group_members(pgid):
        await asyncio.sleep(POLL_SECONDS)


async def kill_group(pgid: int) -> None:
    """SIGKILL every process of the group and wait until none is left."""
    while group_members(pgid):
        signal_group(pgid, signal.SIGKILL)
        await asyncio.sleep(POLL_SECONDS)


async def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and its descendants, and wait until none of them is left. They are stopped (SIGSTOP) first,
    from the root down, until the tree stands still, so that none forks a child this misses. Killing the root
    alone would not do: its children would go to an init and out of reach."""
    frozen: dict[int, int] = {}  # pid -> start ticks (a pid reused meanwhile is not ours)
    while new := [st for st in tree(pid) if frozen.get(st.pid) != st.start_ticks]:
        for st in new:
            _signal(st.pid, signal.SIGSTOP)
            frozen[st.pid] = st.start_ticks
    for p in frozen:
        _signal(p, signal.SIGKILL)
    while any(is_running(p, ticks) for p, ticks in frozen.items()):
        await asyncio.sleep(POLL_SECONDS)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


async def wait_exit(pid: int) -> None:
    """Wait until ``pid`` has exited (works for processes that are not our children, via a pidfd)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)
