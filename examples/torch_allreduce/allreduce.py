"""torch.distributed smoke test for pai: a gloo all_reduce over every task of the job.

Uses only the standard rendezvous variables pai sets in every task (MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
RANK). Rank r contributes r + 1; the sum must be WORLD_SIZE * (WORLD_SIZE + 1) / 2. Exits 1 when it is not.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import sys

import torch
import torch.distributed as dist


def _prefer_loopback(master_addr: str) -> None:
    """Gloo binds to the address the host name resolves to; when the master is local, use loopback."""
    try:
        loopback = master_addr == "localhost" or ipaddress.ip_address(master_addr).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")


def main() -> int:
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    _prefer_loopback(os.environ["MASTER_ADDR"])
    timeout = datetime.timedelta(seconds=int(os.environ.get("ALLREDUCE_TIMEOUT_SECONDS", "300")))
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world_size, timeout=timeout)
    try:
        value = torch.tensor([float(rank + 1)])
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        got = value.item()
    finally:
        dist.destroy_process_group()
    expected = world_size * (world_size + 1) / 2
    ok = got == expected
    verdict = "OK" if ok else "WRONG"
    print(f"rank {rank}/{world_size}: all_reduce sum={got:g} expected={expected:g} {verdict}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
