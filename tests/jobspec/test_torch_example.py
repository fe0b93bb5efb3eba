"""examples/torch-allreduce.json really runs: two ranks, gloo, only MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
from pathlib import Path

import pytest

from pai.jobspec import parse_job

# Looked up, not imported: the ranks import torch in their own processes.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is the optional [torch] extra")

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_two_ranks_all_reduce_through_the_example_command() -> None:
    spec = parse_job((ROOT / "examples" / "torch-allreduce.json").read_bytes(), "application/json").spec
    role = spec.role("worker")
    world = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(role.instances)}
    ranks = [
        subprocess.Popen(
            ["sh", "-c", role.command],
            cwd=ROOT / spec.code_dir,
            env={**os.environ, **world, "RANK": str(rank), "ALLREDUCE_TIMEOUT_SECONDS": "60"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(role.instances)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], outputs
    for rank, out in enumerate(outputs):
        assert f"rank {rank}/2: all_reduce sum=3 expected=3 OK" in out
