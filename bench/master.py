"""What the benchmarks share about the master they measure."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import aiohttp


async def wait_healthy(base: str, proc: subprocess.Popen[bytes] | None = None,
                       log: Path | None = None) -> None:
    """Until the master at ``base`` answers /healthz (60 s at most); a master process that exits ends the wait."""
    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            if proc is not None and proc.poll() is not None:
                tail = log.read_text()[-3000:] if log is not None else ""
                raise SystemExit(f"the master exited {proc.returncode}:\n{tail}")
            try:
                async with http.get(base + "/healthz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("the master did not answer /healthz within 60 s")


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs (the master's front, list processes and their fork servers)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found.extend(children)
        todo.extend(children)
    return found
