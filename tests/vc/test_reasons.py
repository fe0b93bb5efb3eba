"""Every waiting job says why, in words a person can act on, with figures and its queue position."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from pai.vc import Snapshot, schedule
from pai.vc.reasons import WaitCode
from tests.vc.vc_builders import job, node, nodes, running, snap, vc


@dataclass
class Case:
    name: str
    snapshot: Snapshot
    job: str
    code: str
    message: str
    figures: dict[str, Any] | None = None


CASES = [
    Case("largest free GPU block and where it is",
         snap([node("node-3"), node("node-7")], [job("a", 4)], [running("r", "node-3", 6), running("s", "node-7", 5)]),
         "a", "NoNodeFits", "no node has 4 free GPUs (largest free: 3 on node-7)",
         {"role": "main", "needGpu": 4, "largestFreeGpu": 3, "node": "node-7"}),
    Case("GPU type in the message",
         snap([node("x", 8, gpu_type="A100")], [job("a", 4, gpu_type="A100")], [running("r", "x", 6)]),
         "a", "NoNodeFits", "no node has 4 free GPUs of type A100 (largest free: 2 on x)"),
    Case("CPU short on the nodes with enough GPUs",
         snap([node("n0", 8, cpu=16)], [job("a", 2, cpu=3)], [running("r", "n0", 1, cpu=14)]),
         "a", "NoNodeFits", "needs 3 CPU on one node with 2 free GPUs (most free CPU: 2 on n0)"),
    Case("memory short",
         snap([node("n0", 8, mem=4000)], [job("a", 1, mem=3000)], [running("r", "n0", 1, mem=2000)]),
         "a", "NoNodeFits", "needs 3000 MB on one node with 1 free GPU (most free memory: 2000 on n0)"),
    Case("a gang: how many nodes it needs and how many have room",
         snap(nodes(4), [job("g", 8, instances=3)], [running("r", ["node-0", "node-1"], 1)]),
         "g", "NoNodeFits", "needs 3 nodes with 8 GPU, 1 CPU, 1024 MB free; 2 have them now",
         {"role": "main", "needNodes": 3, "haveNodes": 2, "needGpu": 8}),
    Case("NeverFits names the largest node",
         snap([node("big", 8), node("small", 4)], [job("a", 16)]),
         "a", "NeverFits", "no node has 16 GPUs (largest: 8 on big)"),
    Case("NeverFits for a gang larger than the cluster",
         snap(nodes(2), [job("g", 8, instances=3)]),
         "g", "NeverFits", "needs 3 nodes with 8 GPU, 1 CPU, 1024 MB; the cluster has 2"),
    Case("NeverFits for a GPU type the cluster lacks",
         snap(nodes(2), [job("a", 1, gpu_type="H100")]),
         "a", "NeverFits", "the cluster has no node of type H100"),
    Case("VC at max",
         snap(nodes(2), [job("a", 4, vc="dev")], [running("r", "node-0", 6, vc="dev")], [vc("dev", 0, max=8)]),
         "a", "VcAtMax", "VC `dev` at max: 6/8 GPU in use, the job needs 4",
         {"vc": "dev", "resource": "GPU", "used": 6, "max": 8, "need": 4}),
    Case("user limit",
         snap(nodes(2), [job("a", 4, user="ann")], [running("r", "node-0", 6, user="ann")],
              [vc("default", user_gpu=8)]),
         "a", "UserLimit", "user ann would use 10 GPUs in VC `default`; the limit is 8"),
    Case("reclaim does not apply: the job would pass its VC's guarantee (on CPU here)",
         snap(nodes(1), [job("a", 4, vc="b")], [running("r", "node-0", 8, vc="x")],
              [vc("x", (0, 0, 0)), vc("b", (4, 0, 0))]),
         "a", "NoNodeFits", "no node has 4 free GPUs (largest free: 0 on node-0); VC `b` would pass its guarantee "
         "(CPU 1/0, MB 1024/0), so capacity other VCs borrowed is not reclaimed for this job"),
    Case("unknown VC",
         snap(nodes(1), [job("a", 1, vc="ghost")]),
         "a", "UnknownVc", "virtual cluster `ghost` does not exist"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_reason(case: Case) -> None:
    """The reasons themselves: what would unblock each is tests/vc/test_unblock.py's."""
    quiet = replace(case.snapshot, config=replace(case.snapshot.config, unblock_hints_per_vc=0))
    reason = schedule(quiet).waiting[case.job]
    assert (reason.code, reason.message) == (case.code, case.message)
    assert reason.position == 1
    if case.figures is not None:
        assert reason.figures == case.figures
    assert reason.to_dict()["code"] == case.code


@pytest.mark.parametrize(("code", "must_act"), [(WaitCode.NEVER_FITS, True), (WaitCode.UNKNOWN_VC, True),
                                                (WaitCode.NO_NODE_FITS, False), (WaitCode.VC_AT_MAX, False)])
def test_codes_say_whether_waiting_helps(code: WaitCode, must_act: bool) -> None:
    assert code.user_must_act is must_act


def test_positions_count_per_vc() -> None:
    s = snap(nodes(1), [job("a1", 9, vc="a", at=0), job("b1", 9, vc="b", at=1), job("a2", 9, vc="a", at=2)],
             vcs=[vc("a"), vc("b")])
    got = {k: (r.position, r.code) for k, r in schedule(s).waiting.items()}
    assert got == {"a1": (1, "NeverFits"), "a2": (2, "NeverFits"), "b1": (1, "NeverFits")}
