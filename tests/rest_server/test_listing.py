"""Long job lists are read in a list process, short pages on a reader thread; a list process that dies is replaced,
and one whose master is gone ends."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys

import pytest

from pai.launcher.queries import JobFilters
from pai.rest_server import listing
from pai.rest_server.keys import LAUNCHER, LISTS
from pai.rest_server.listing import IN_PROCESS_LIMIT, render_list
from tests.eventually import eventually
from tests.rest_server.conftest import Api


@pytest.fixture
def list_processes() -> int:
    return 1


async def submit(api: Api, name: str) -> None:
    body = {"jobName": name, "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "true"}]}
    status, answer = await api.call("POST", "/api/v2/jobs", json_body=body)
    assert status == 202, answer


async def test_a_long_list_is_read_in_a_list_process_and_a_short_page_here(api: Api) -> None:
    for name in ("a", "b", "c"):
        await submit(api, name)
    lists = api.client.app[LISTS]
    status, page = await api.call("GET", f"/api/v2/jobs?limit={IN_PROCESS_LIMIT}")
    assert status == 200 and [j["name"] for j in page] == ["c", "b", "a"]
    assert lists.pids == set()  # a short page: a reader thread, no process started
    status, everything = await api.call("GET", "/api/v2/jobs")  # OpenPAI's default limit: 5,000
    assert status == 200 and [j["name"] for j in everything] == ["c", "b", "a"]
    assert lists.pids and os.getpid() not in lists.pids
    resp = await api.client.get("/api/v2/jobs?limit=5000&withTotalCount=true&username=admin", headers=api.headers())
    here = render_list(api.client.app[LAUNCHER].db, JobFilters(limit=5000, with_total=True, users=("admin",)))
    assert resp.status == 200 and await resp.read() == here  # the same bytes as a reader thread renders


async def test_a_list_process_that_dies_is_replaced_and_no_list_fails(api: Api) -> None:
    await submit(api, "a")
    lists = api.client.app[LISTS]
    status, _ = await api.call("GET", "/api/v2/jobs")
    assert status == 200 and len(lists.pids) == 1
    (dead,) = lists.pids
    os.kill(dead, signal.SIGKILL)

    async def answered_by_a_new_process() -> bool:
        status, page = await api.call("GET", "/api/v2/jobs")
        assert status == 200 and [j["name"] for j in page] == ["a"]  # every list is answered meanwhile
        return bool(lists.pids) and dead not in lists.pids

    await eventually(answered_by_a_new_process, timeout=30)


async def test_a_list_process_ends_when_its_master_is_gone_even_killed() -> None:
    master = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watchdog = multiprocessing.get_context("spawn").Process(target=listing.end_with, args=(master.pid,))
    watchdog.start()
    try:
        await asyncio.sleep(2 * listing.WATCHDOG_SECONDS)
        assert watchdog.is_alive()  # the master is there: the list process stays
        master.kill()
        master.wait()  # reaped, as the master's parent (a shell, systemd) reaps it
        await eventually(lambda: not watchdog.is_alive(), timeout=10, what="the list process ended")
    finally:
        master.kill()
        watchdog.kill()
