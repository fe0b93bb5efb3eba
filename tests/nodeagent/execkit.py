"""Helpers for exec tests: read a session's output, look for processes on the node."""

from __future__ import annotations

import asyncio

from pai.nodeagent import process_group
from pai.nodeagent.taskexec import STDERR, STDOUT, ExecSession

TIMEOUT = 20.0


async def collect(session: ExecSession) -> tuple[bytes, bytes, int]:
    """All of a session's output (stdout, stderr) and its exit code."""
    out = {STDOUT: b"", STDERR: b""}
    async with asyncio.timeout(TIMEOUT):
        while (chunk := await session.read()) is not None:
            out[chunk[0]] += chunk[1]
        return out[STDOUT], out[STDERR], await session.wait()


async def read_until(session: ExecSession, marker: bytes, seen: bytearray | None = None) -> bytes:
    """Read stdout until ``marker`` has appeared in what this call read (``seen`` collects it too)."""
    got = bytearray()
    async with asyncio.timeout(TIMEOUT):
        while marker not in got:
            chunk = await session.read()
            assert chunk is not None, f"output ended before {marker!r}: {bytes(got)!r}"
            got += chunk[1]
    if seen is not None:
        seen += got
    return bytes(got)


def processes_with(marker: str) -> list[int]:
    """Live processes on the node whose command line holds ``marker``."""
    found = []
    for st in process_group.live_stats():
        try:
            cmdline = (process_group.PROC / str(st.pid) / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(st.pid)
    return found
