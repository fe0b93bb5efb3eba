"""Fair sharing of borrowed capacity: borrowing VCs go by their weighted dominant share of what they borrow, and a
borrower may take borrowed work of a VC whose share stays higher (rule ``fair-share``). Off by default."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from pai.domain.errors import InvalidParametersError
from pai.domain.resources import Resources
from pai.jobspec.vcconfig import load_cluster_config, validate_cluster_config
from pai.main import cli
from pai.vc import PendingJob, Snapshot, VcQuota, schedule
from pai.vc.config import parse_config
from pai.vc.fairshare import INFINITE, share
from pai.vc.ledger import VcLedger
from pai.vc.policy import FairShareStrategy, FairSharing, Reclaim
from pai.vc.simulate import simulate
from tests.vc.test_preemption import Case, check
from tests.vc.test_simulate import doc_block
from tests.vc.vc_builders import admitted, codes, job, node, pinned, running, snap, vc

LTE = FairShareStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
LTI = FairShareStrategy.LESS_THAN_INITIAL_SHARE


def on(strategy: FairShareStrategy = LTE) -> dict[str, Any]:
    """Scheduler settings with fair sharing enabled."""
    return {"fair_sharing": FairSharing(True, strategy)}


def weighted(q: VcQuota, weight: float) -> VcQuota:
    return replace(q, weight=weight)


def queue(vc_name: str, count: int, gpu: int = 1, *, at: float = 0.0, cpu: int = 1, priority: int = 10
          ) -> list[PendingJob]:
    """``count`` jobs of the VC named ``<vc><k>`` (k from 1), submitted one second apart from ``at``."""
    return [job(f"{vc_name}{k}", gpu, cpu=cpu, vc=vc_name, at=at + k, priority=priority) for k in range(1, count + 1)]


def names(vc_name: str, first: int, last: int) -> set[str]:
    return {f"{vc_name}{k}" for k in range(first, last + 1)}


# ---- order: who gets the idle capacity --------------------------------------------------------------------------


@dataclass
class OrderCase:
    name: str
    snapshot: Snapshot
    admitted: set[str]


TWO = [node("n0"), node("n1")]  # 16 GPU, 64 CPU: `default` holds it all and lends it
A0_B0 = [vc("a", 0), vc("b", 0)]
EQUAL = [*queue("a", 6, 2), *queue("b", 6, 2, at=10)]
THIRDS = [node(f"n{i}", 4) for i in range(3)]  # 12 GPU
TWO_TO_ONE = [*queue("a", 10), *queue("b", 10, at=20)]
CPU_NODE = [node("n0", 8, 64)]  # 8 GPU, 64 CPU
CPU_HEAVY = [*queue("a", 4, cpu=16), *queue("b", 8, at=10)]

ORDER = [
    OrderCase("off: borrowers go by priority and age, as today",
              snap(TWO, EQUAL, vcs=A0_B0), names("a", 1, 6) | names("b", 1, 2)),
    OrderCase("two borrowers of equal weight split idle capacity",
              snap(TWO, EQUAL, vcs=A0_B0, **on()), names("a", 1, 4) | names("b", 1, 4)),
    OrderCase("weights 2:1 split it 2:1",
              snap(THIRDS, TWO_TO_ONE, vcs=[weighted(vc("a", 0), 2), vc("b", 0)], **on()),
              names("a", 1, 8) | names("b", 1, 4)),
    OrderCase("without fair sharing the weights mean nothing",
              snap(THIRDS, TWO_TO_ONE, vcs=[weighted(vc("a", 0), 2), vc("b", 0)]),
              names("a", 1, 10) | names("b", 1, 2)),
    # a's jobs take a quarter of the CPU each (GPU: an eighth): b gets two jobs for every one of a's
    OrderCase("the dominant resource of a CPU-heavy VC is CPU",
              snap(CPU_NODE, CPU_HEAVY, vcs=A0_B0, **on()), names("a", 1, 3) | names("b", 1, 5)),
    OrderCase("a VC of weight 0 borrows only what no other VC wants",
              snap(TWO, EQUAL, vcs=[weighted(vc("a", 0), 0), vc("b", 0)], **on()),
              names("b", 1, 6) | names("a", 1, 2)),
    OrderCase("jobs within their VC's guarantee still go first",
              snap([node("n0")], [*queue("a", 2, 4, priority=100), job("g1", 4, vc="g", at=50)],
                   vcs=[vc("a", 0), vc("g", 4)], **on()),
              {"a1", "g1"}),
    OrderCase("oppo jobs still go after every other borrowing job",
              snap([node("n0")], [job("a1", 2, vc="a", priority=-1, at=0), job("b1", 8, vc="b", at=10)],
                   vcs=A0_B0, **on()),
              {"b1"}),
    OrderCase("a share counts what the VC already borrows",
              snap(TWO, EQUAL, [running("a0", "n0", 4, vc="a")], vcs=A0_B0, **on()),
              names("a", 1, 2) | names("b", 1, 4)),
]


@pytest.mark.parametrize("case", ORDER, ids=lambda c: c.name)
def test_order(case: OrderCase) -> None:
    d = schedule(case.snapshot)
    assert set(admitted(d)) == case.admitted
    assert not d.preemptions


# ---- preemption between borrowers -------------------------------------------------------------------------------

N0 = [node("n0")]  # 8 GPU; `default` holds it all
A0_B0_WAIT = {"a1": "WaitingForPreemption"}
# b borrows 6 of 8 GPU (share 0.75) in three 2-GPU jobs; the last 2 GPU run `default`'s own work
B_SIX = [running("b1", "n0", 2, vc="b", started=1), running("b2", "n0", 2, vc="b", started=2),
         running("b3", "n0", 2, vc="b", started=3)]
# b at 0.75 in a 2-GPU job and a 4-GPU one (started last); a 4-GPU job of a would leave b at 0.25 or 0.5
B_BIG_LAST = [running("b1", "n0", 2, vc="b", started=1), running("b2", "n0", 4, vc="b", started=2),
              running("d", "n0", 2, started=1)]
B_HALF = [running("b1", "n0", 4, vc="b"), running("d", "n0", 4)]  # b at 0.5; `default` within its guarantee
A1_2 = job("a1", 2, vc="a")
A1_4 = job("a1", 4, vc="a")
FULL = [*B_SIX, running("d", "n0", 2, started=1)]
# b guarantees 4 GPU and borrows 2 in one 6-GPU job, and much CPU on n1: its share stays high without that job
BELOW = [running("b1", "n0", 6, cpu=2, vc="b", started=1), running("d", "n0", 2, cpu=2, started=1),
         running("b2", "n1", 0, cpu=30, vc="b", started=1), running("d2", "n1", 8, cpu=1, started=1)]
B_GUARANTEE_4 = vc("b", (4, 4, 10**6))

PREEMPT = [
    Case("off: a borrower never preempts another borrower",
         snap(N0, [A1_2], FULL, A0_B0), {}, waiting={"a1": "NoNodeFits"}),
    Case("a borrower above its fair share is reclaimed by one below it (most recently started first)",
         snap(N0, [A1_2], FULL, A0_B0, **on()), {"b3": "a1"}, {"a1": {"main-0": "n0"}}, A0_B0_WAIT),
    Case("LessThanInitialShare takes the same",
         snap(N0, [A1_2], FULL, A0_B0, **on(LTI)), {"b3": "a1"}, {"a1": {"main-0": "n0"}}, A0_B0_WAIT),
    Case("LessThanOrEqualToFinalShare spares a job whose VC would then be left below the preemptor's",
         snap(N0, [A1_4], B_BIG_LAST, A0_B0, **on()), {}, waiting={"a1": "NoNodeFits"}),
    Case("LessThanInitialShare takes it: the preemptor's share is below the victim VC's before",
         snap(N0, [A1_4], B_BIG_LAST, A0_B0, **on(LTI)), {"b2": "a1"}, {"a1": {"main-0": "n0"}}, A0_B0_WAIT),
    Case("LessThanInitialShare: an equal share does not preempt",
         snap(N0, [A1_4], B_HALF, A0_B0, **on(LTI)),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("weight protects: b of weight 2 borrowing 6 has share 0.375, below a's 0.5 with a 4-GPU job",
         snap(N0, [A1_4], B_SIX, [vc("a", 0), weighted(vc("b", 0), 2)], **on()), {}, waiting={"a1": "NoNodeFits"}),
    Case("weight 1: a 4-GPU job of a (share 0.5) takes b3 but not b2 too (b would be left at 0.25)",
         snap(N0, [A1_4], FULL, A0_B0, **on()), {}, waiting={"a1": "NoNodeFits"}),
    Case("weight 2: a's share with it is 0.25, at most b's once b3 and b2 are gone",
         snap(N0, [A1_4], FULL, [weighted(vc("a", 0), 2), vc("b", 0)], **on()),
         {"b3": "a1", "b2": "a1"}, {"a1": {"main-0": "n0"}}, A0_B0_WAIT),
    Case("a VC of weight 0 that borrows is reclaimed from by any borrower",
         snap(N0, [job("a1", 6, vc="a")], [running("b1", "n0", 2, vc="b"), running("b2", "n0", 6, vc="b", started=2)],
              [vc("a", 0), weighted(vc("b", 0), 0)], **on()),
         {"b2": "a1"}, {"a1": {"main-0": "n0"}}, A0_B0_WAIT),
    Case("non-preemptible borrowed work is never a victim: the next job is taken",
         snap(N0, [A1_2], [*B_SIX[:2], pinned("b3", "n0", 2, vc="b", started=3), running("d", "n0", 2, started=1)],
              A0_B0, **on()),
         {"b2": "a1"}, {"a1": {"main-0": "n0"}}, A0_B0_WAIT),
    Case("only non-preemptible borrowed work to take: the job waits, saying so",
         snap(N0, [A1_2], [pinned(f"b{k}", "n0", 2, vc="b", started=k) for k in (1, 2, 3)]
              + [running("d", "n0", 2, started=1)], A0_B0, **on()),
         {}, waiting={"a1": "HeldByNonPreemptible"}),
    Case("a VC within its guarantee gives nothing by fair share",
         snap(N0, [A1_2], [running("b1", "n0", 4, vc="b"), running("d", "n0", 4)], [vc("a", 0), vc("b", 4)],
              **on()),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("fair share never takes a VC below its guarantee of a resource it borrows",
         snap([node("n0"), node("n1")], [job("a1", 4, vc="a")], BELOW, [vc("a", 0), B_GUARANTEE_4], **on()),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("a victim holding none of what its VC borrows is not taken (b borrows GPU; b-cpu holds only CPU)",
         snap([node("n0"), node("n1")], [job("a1", 4, cpu=8, vc="a")],
              [running("b-cpu", "n0", 0, cpu=28, vc="b"), running("b-gpu", "n1", 8, vc="b")],
              [vc("a", 0), vc("b", (0, 32, 10**6))], **on()),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("the preemptor's VC's reclaim policy Never: no fair-share preemption",
         snap(N0, [A1_2], FULL, [vc("a", 0, reclaim=Reclaim.NEVER), vc("b", 0)], **on()),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("reclaim LowerPriority: fair share spares equal priority",
         snap(N0, [A1_2], FULL, [vc("a", 0, reclaim=Reclaim.LOWER_PRIORITY), vc("b", 0)], **on()),
         {}, waiting={"a1": "NoNodeFits"}),
    Case("reclaim LowerPriority: fair share takes lower priority",
         snap(N0, [job("a1", 2, vc="a", priority=100)], FULL,
              [vc("a", 0, reclaim=Reclaim.LOWER_PRIORITY), vc("b", 0)], **on()),
         {"b3": "a1"}, {"a1": {"main-0": "n0"}}, A0_B0_WAIT),
    Case("an oppo job does not preempt by fair share",
         snap(N0, [job("a1", 2, vc="a", priority=-1)], FULL, A0_B0, **on()), {}, waiting={"a1": "NoNodeFits"}),
    Case("whileBorrowing, where it allows, names its own rule",
         snap(N0, [job("a1", 2, vc="a", priority=100)],
              [*B_SIX[:2], running("b3", "n0", 2, vc="b", priority=-1, started=3), running("d", "n0", 2)],
              [vc("a", 0, while_borrowing=0), vc("b", 0)], **on()),
         {"b3": "a1"}, {"a1": {"main-0": "n0"}}, A0_B0_WAIT),
    Case("reclaim is unchanged: a VC below its guarantee reclaims whatever the shares",
         snap(N0, [job("a1", 4, vc="a")], [running("b1", "n0", 4, vc="b"), running("b2", "n0", 4, vc="b", started=2)],
              [vc("a", 4), weighted(vc("b", 4), 100)], **on()),
         {"b2": "a1"}, {"a1": {"main-0": "n0"}}, A0_B0_WAIT),
]


@pytest.mark.parametrize("case", PREEMPT, ids=lambda c: c.name)
def test_preemption(case: Case) -> None:
    check(case)


def test_rule_names_and_message() -> None:
    d = schedule(snap(N0, [A1_2], FULL, A0_B0, **on()))
    assert [(p.victim, p.preemptor, p.rule) for p in d.preemptions] == [("b3", "a1", "fair-share")]
    assert d.preemptions[0].message == (
        "fair sharing: VC `b` borrows a larger weighted share of the cluster than VC `a` would with a1 (priority 10), "
        "which preempts b3 (priority 10)")
    rules = {p.rule for p in schedule(snap(N0, [job("a1", 2, vc="a", priority=100)],
                                           [*B_SIX[:2], running("b3", "n0", 2, vc="b", priority=-1, started=3),
                                            running("d", "n0", 2)],
                                           [vc("a", 0, while_borrowing=0), vc("b", 0)], **on())).preemptions}
    assert rules == {"while-borrowing"}


# ---- the share ----------------------------------------------------------------------------------------------------

TOTAL = Resources(16, 64, 512_000)


@pytest.mark.parametrize(("used", "guaranteed", "weight", "expected"), [
    pytest.param(Resources(4, 4, 1000), Resources(8, 32, 10**6), 1.0, 0.0, id="within its guarantee: 0"),
    pytest.param(Resources(12, 4, 1000), Resources(8, 32, 10**6), 1.0, 0.25, id="GPU borrowed: 4 of 16"),
    pytest.param(Resources(12, 4, 1000), Resources(8, 32, 10**6), 2.0, 0.125, id="weight 2 halves it"),
    pytest.param(Resources(9, 64, 1000), Resources(8, 32, 10**6), 1.0, 0.5, id="CPU dominates: 32 of 64"),
    pytest.param(Resources(9, 4, 1000), Resources(8, 32, 10**6), 0.0, INFINITE, id="weight 0 borrowing: infinite"),
    pytest.param(Resources(8, 4, 1000), Resources(8, 32, 10**6), 0.0, 0.0, id="weight 0 not borrowing: 0"),
])
def test_share(used: Resources, guaranteed: Resources, weight: float, expected: float) -> None:
    ledger = VcLedger(VcQuota("a", guaranteed, weight=weight), TOTAL)
    assert share(used, ledger, TOTAL) == expected


def test_off_by_default_and_the_weights_change_nothing_then() -> None:
    assert not snap(N0).config.fair_sharing.enabled
    base = snap(TWO, EQUAL, FULL[:1], A0_B0)
    heavy = snap(TWO, EQUAL, FULL[:1], [weighted(vc("a", 0), 0), weighted(vc("b", 0), 5)])
    assert schedule(base) == schedule(heavy)


def test_waiting_codes_of_the_fair_split() -> None:
    d = schedule(snap(TWO, EQUAL, vcs=A0_B0, **on()))
    assert codes(d) == {k: "NoNodeFits" for k in ("a5", "a6", "b5", "b6")}


# ---- the configuration file, the simulator, the replay ------------------------------------------------------------

CONFIG = """
virtualClusters:
  - {name: research, fairSharing: {weight: 2.5}}
  - {name: dev}
scheduler:
  fairSharing: {enabled: true, strategy: LessThanInitialShare}
"""


def test_the_configuration_file_sets_it_and_the_weights() -> None:
    cfg = parse_config(load_cluster_config(CONFIG, "vc.yaml"))
    assert cfg.scheduler.fair_sharing == FairSharing(True, LTI)
    assert {q.name: q.weight for q in cfg.quotas(TOTAL)} == {"research": 2.5, "dev": 1.0, "default": 1.0}
    assert parse_config({}).scheduler.fair_sharing == FairSharing(False, LTE)


@pytest.mark.parametrize(("doc", "fragment"), [
    ({"scheduler": {"fairSharing": {"strategy": "Fairest"}}}, "scheduler.fairSharing.strategy"),
    ({"scheduler": {"fairSharing": {"enable": True}}}, "scheduler.fairSharing"),
    ({"virtualClusters": [{"name": "a", "fairSharing": {"weight": -1}}]}, "fairSharing.weight"),
    ({"virtualClusters": [{"name": "a", "weight": 2}]}, "weight"),
])
def test_the_schema_refuses(doc: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidParametersError) as e:
        validate_cluster_config(doc)
    assert fragment in e.value.message


def test_the_documented_example_gives_the_documented_result() -> None:
    scenario = yaml.safe_load(doc_block("### Fair sharing example"))
    expected = yaml.safe_load(doc_block("### Fair sharing result"))
    got = simulate(scenario)
    assert got["admitted"] == expected["admitted"]
    assert got["preempted"] == expected["preempted"]
    assert {k: r["code"] for k, r in got["waiting"].items()} == {k: r["code"] for k, r in expected["waiting"].items()}
    # as the text after it says: LessThanInitialShare also takes dev-2; without fair sharing dev-4 goes first
    lti = {**scenario, "scheduler": {"fairSharing": {"enabled": True, "strategy": "LessThanInitialShare"}}}
    assert simulate(lti)["preempted"] == ["dev-3", "dev-2"]
    assert list(simulate({**scenario, "scheduler": {}})["admitted"]) == ["dev-4"]


def test_a_replay_reads_it_from_the_configuration(tmp_path: Path) -> None:
    nodes = [{"name": "n", "count": 1, "gpu": 8, "cpu": 32, "memoryMB": 256_000}]
    jobs = [{"name": n, "submittedAt": at, "duration": 1000 if vc == "dev" else 100, "vc": vc,
             "tasks": [{"gpu": 4, "cpu": 4, "memoryMB": 1000}]}
            for n, at, vc in (("dev-1", 0, "dev"), ("dev-2", 1, "dev"), ("r-1", 100, "research"))]
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps(x) for x in [{"trace": 1, "nodes": nodes}, *jobs]) + "\n")
    vcs = [{"name": "prod", "guaranteed": {"gpu": 8, "cpu": 32, "memoryMB": 256_000}}, {"name": "research"},
           {"name": "dev"}]
    paths = []
    for name, enabled in (("off", False), ("on", True)):
        paths += ["--config", tmp_path / f"{name}.yaml"]
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(
            {"virtualClusters": vcs, "scheduler": {"fairSharing": {"enabled": enabled}}}))
    result = CliRunner().invoke(cli, [str(a) for a in ("vc", "replay", trace, *paths, "--json")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)["configurations"]
    assert [c["preemptions"] for c in figures] == [0, 1]


@pytest.mark.parametrize(("strategy", "reclaim", "words"), [
    (LTE, Reclaim.ANY, "with it VC `a` would have a fair share of 0.5; fair sharing takes borrowed work only from "
                       "VCs whose share is at or above that once the work is gone"),
    (LTI, Reclaim.ANY, "with it VC `a` would have a fair share of 0.5; fair sharing takes borrowed work only from "
                       "VCs whose share is above that"),
    (LTE, Reclaim.NEVER, "fair sharing takes nothing for it (VC `a`'s reclaim policy is Never)"),
])
def test_a_borrower_that_waits_is_told_its_share(strategy: FairShareStrategy, reclaim: Reclaim, words: str) -> None:
    d = schedule(snap(N0, [A1_4], B_HALF, [vc("a", 0, reclaim=reclaim), vc("b", 0)], **on(strategy)))
    reason = d.waiting["a1"]
    assert reason.code == "NoNodeFits" and f"; {words}" in reason.message, reason.message
    assert reason.figures["fairShare"] == 0.5
    off = schedule(snap(N0, [A1_4], B_HALF, A0_B0)).waiting["a1"]
    assert "fair" not in off.message and "fairShare" not in off.figures
