"""Fencing: a task runs at most once, even when its agent loses the master or dies.

The master declares a node LOST after ``node_timeout`` without a heartbeat and requeues its tasks elsewhere
after a further fencing window. Before that window ends the node's tasks must be gone:

- the agent itself stops them (SIGTERM, ``fence_grace``, SIGKILL) once it has had no reply for
  ``node_timeout`` (see ``Agent._fence_watch``);
- in case the agent is dead or frozen, it keeps a **lease** (until when, on this machine's monotonic clock, its
  tasks may run) that it renews on every reply, and a **watchdog** process (``python -m pai.nodeagent.fence``),
  started in a session of its own so that it outlives the agent, stops every running attempt once the lease has
  expired (the process runtime's process groups, or the docker runtime's containers labelled with this agent).

The lease travels in a file and down a pipe from the agent to its watchdog (``lease.py``): an agent that cannot
write the file (a full or read-only work directory) still holds its watchdog off.

A restarted agent takes the lease over (a new owner id) in the file: the watchdog of the agent before it then
exits. An agent that stops its tasks on the way out releases the lease, and its watchdog exits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pai.nodeagent import attempt_record, process_group
from pai.nodeagent.lease import LEASE_FILE, Channel, Lease, current, read_lease

POLL_SECONDS = 0.5
SLACK_SECONDS = 1.0  # the watchdog acts this long after the lease expired: the agent, if alive, goes first

log = logging.getLogger("pai.nodeagent.fence")


def spawn_watchdog(work_dir: Path, owner: str, state_dir: Path, runtime: str = "process",
                   docker_host: str | None = None, lease: Lease | None = None) -> subprocess.Popen[bytes]:
    """Start the watchdog of this agent's lease in a session of its own (it must outlive the agent). With
    ``lease``, the lease also reaches it by a pipe (see the module's doc)."""
    me = process_group.read_stat(os.getpid())
    read_end, write_end = os.pipe() if lease is not None else (-1, -1)
    args = [sys.executable, "-P", "-m", "pai.nodeagent.fence", str(work_dir), owner, str(state_dir), str(os.getpid()),
            str(me.start_ticks if me else 0), runtime, docker_host or "", str(read_end) if lease else ""]
    try:
        out = os.open(work_dir / "fence.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:  # a read-only work directory: the watchdog still guards, without a log
        out = os.open(os.devnull, os.O_WRONLY)
    try:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                pass_fds=(read_end,) if lease else ())
    finally:
        os.close(out)
    if lease is not None:
        os.close(read_end)
        lease.attach(write_end)
    return proc


# ---- the watchdog -------------------------------------------------------------------------------------


def running_groups(state_dir: Path) -> list[tuple[str, int]]:
    """``(attempt id, process group)`` of every attempt of the process runtime that still runs."""
    groups = []
    for path in sorted(state_dir.glob("*.json")):
        record = attempt_record.load(path)
        if record is None or not record.running or record.pgid is None:
            continue
        if process_group.group_members(record.pgid):
            groups.append((record.attempt_id, record.pgid))
    return groups


def fence(groups: list[tuple[str, int]], grace: float) -> None:
    """SIGTERM every group, give them ``grace`` seconds together, SIGKILL what is left."""
    for _, pgid in groups:
        process_group.signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(process_group.group_members(g) for _, g in groups):
        time.sleep(process_group.POLL_SECONDS)
    for _, pgid in groups:
        while process_group.group_members(pgid):
            process_group.signal_group(pgid, signal.SIGKILL)
            time.sleep(process_group.POLL_SECONDS)


def fence_containers(state_dir: Path, grace: float, docker_host: str | None) -> list[str]:
    """Stop (SIGTERM, ``grace``, SIGKILL) the running containers the docker runtime of ``state_dir`` started;
    their attempt ids."""
    import docker  # only a docker agent's watchdog needs the SDK
    import docker.errors

    client = docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
    try:
        running = client.api.containers(filters={"label": f"pai.agent={state_dir.resolve()}"})
        for c in running:
            with contextlib.suppress(docker.errors.NotFound):  # it ended meanwhile
                client.api.stop(c["Id"], timeout=max(0, int(grace)))
        return [str(c["Labels"].get("pai.attempt", c["Id"][:12])) for c in running]
    finally:
        client.close()


def watch(work_dir: Path, owner: str, state_dir: Path, agent_pid: int, agent_ticks: int, runtime: str = "process",
          docker_host: str | None = None, channel: int | None = None) -> str:
    """Guard the lease until another agent owns it, it is released, or it expired with the agent gone."""
    path = work_dir / LEASE_FILE
    pipe = Channel(channel) if channel is not None else None
    first = read_lease(path)
    stale_owner = first.owner if first is not None and first.owner != owner else None
    while True:
        sent = pipe.poll() if pipe is not None else None
        lease, why = current(owner, read_lease(path), sent, stale_owner, pipe is not None)
        if why is not None:
            return why
        if pipe is not None and pipe.closed and lease is None:
            return "the agent is gone and never sent its lease"
        if lease is not None and time.monotonic() > lease.until + SLACK_SECONDS:
            if runtime == "docker":
                try:
                    fenced = fence_containers(state_dir, lease.grace, docker_host)
                except Exception as e:  # the engine is down too: its containers are not running either
                    log.warning("lease expired: cannot reach the Docker Engine error=%s", e)
                    fenced = []
                if fenced:
                    log.warning("lease expired: fenced containers attempts=%s", ",".join(fenced))
            else:
                groups = running_groups(state_dir)
                if groups:
                    log.warning("lease expired: fencing attempts=%s", ",".join(a for a, _ in groups))
                    fence(groups, lease.grace)
            if not process_group.is_running(agent_pid, agent_ticks or None):
                return "the lease expired and the agent is gone: nothing left to guard"
        time.sleep(POLL_SECONDS)


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.raiseExceptions = False  # a full or read-only fence.log: go on guarding without a word
    work_dir, owner, state_dir, pid, ticks = Path(argv[0]), argv[1], Path(argv[2]), int(argv[3]), int(argv[4])
    runtime, docker_host = (argv[5], argv[6] or None) if len(argv) > 6 else ("process", None)
    channel = int(argv[7]) if len(argv) > 7 and argv[7] else None
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the agent's terminal is not for the watchdog
    log.info("watching the lease owner=%s agent_pid=%d pipe=%s", owner, pid, channel is not None)
    with contextlib.suppress(KeyboardInterrupt):
        reason = watch(work_dir, owner, state_dir, pid, ticks, runtime, docker_host, channel)
        log.info("watchdog exits: %s owner=%s", reason, owner)


if __name__ == "__main__":
    main(sys.argv[1:])
