"""Elastic training with torchrun for pai (issue 31): started as ``torchrun train.py``, with no argument of ours.

pai sets torchrun's elastic launch in the task's environment (``PET_NNODES=min:max``, the c10d rendezvous at the
role's first task, ``PET_MAX_RESTARTS``), so torchrun re-forms the group whenever the job grows or shrinks and
restarts this script in every member with the new ``WORLD_SIZE`` and ``RANK``. What survives a restart is the
checkpoint: rank 0 writes it after every step into ``CHECKPOINT_DIR`` (a directory every task sees), and every
worker resumes from it, so the step counter never goes back.

Each step is one gloo ``all_reduce`` of ones (its sum is the world size); rank 0 appends ``step world members`` to
``PROGRESS_FILE`` (``members``: how many workers ``$PAI_ELASTIC_MEMBERS_FILE`` lists now). It stops after
``STEPS`` steps (0: never).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist


def load(ckpt: Path) -> int:
    try:
        return int(json.loads(ckpt.read_text())["step"])
    except (OSError, ValueError, KeyError):
        return 0


def save(ckpt: Path, step: int) -> None:
    tmp = ckpt.with_suffix(".tmp")
    tmp.write_text(json.dumps({"step": step}))
    os.replace(tmp, ckpt)  # a worker killed mid-write leaves the previous checkpoint whole


def members() -> int:
    path = os.environ.get("PAI_ELASTIC_MEMBERS_FILE")
    if not path:
        return 0
    return sum(len(v) for v in json.loads(Path(path).read_text()).values())


def main() -> int:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Path(os.environ.get("CHECKPOINT_DIR", "."))
    out.mkdir(parents=True, exist_ok=True)
    ckpt, progress = out / "checkpoint.json", Path(os.environ.get("PROGRESS_FILE", str(out / "progress.log")))
    start = torch.tensor([load(ckpt)])
    dist.broadcast(start, 0)  # every rank resumes from rank 0's view of the checkpoint
    step, steps = int(start.item()), int(os.environ.get("STEPS", "0"))
    print(f"rank {rank}/{world}: resuming at step {step}", flush=True)
    while steps == 0 or step < steps:
        ones = torch.ones(1)
        dist.all_reduce(ones)
        if int(ones.item()) != world:
            print(f"rank {rank}: all_reduce gave {ones.item()}, expected {world}", file=sys.stderr)
            return 1
        step += 1
        if rank == 0:
            save(ckpt, step)
            with progress.open("a") as f:
                f.write(f"{step} {world} {members()}\n")
        time.sleep(float(os.environ.get("STEP_SECONDS", "0.2")))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
