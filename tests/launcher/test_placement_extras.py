"""A submitted job's ``extras.nodeSelector`` and ``extras.wholeNodes`` reach the scheduler through the store: the
job lands on the labelled node, and nothing is placed beside a whole-node job."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from pai.domain.resources import Resources
from pai.jobspec import parse_job
from pai.launcher.service import Launcher, LauncherConfig
from pai.protocol.messages import NodeInfo, RegisterRequest
from pai.store.db import Database
from tests.launcher.builders import Clock, user


def submit(launcher: Launcher, name: str, gpu: int, extras: dict[str, Any]) -> str:
    text = yaml.safe_dump({
        "protocolVersion": 2, "name": name, "type": "job",
        "prerequisites": [{"name": "image", "type": "dockerimage", "uri": "busybox"}],
        "taskRoles": {"w": {"dockerImage": "image", "commands": ["sleep 600"],
                            "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": gpu}}},
        "extras": extras,
    })
    return launcher.submit(user("alice"), parse_job(text, "text/yaml").spec, text).key


@pytest.fixture
def launcher(db: Database) -> Launcher:
    launcher = Launcher(db, LauncherConfig(), clock=Clock(1000.0))
    for name, zone in (("n1", "a"), ("n2", "b")):
        launcher.register(RegisterRequest(NodeInfo(name, "127.0.0.5", Resources(8, 16, 65536), labels={"zone": zone})))
    return launcher


@pytest.mark.parametrize("full", [False, True], ids=["incremental", "full"])
def test_a_job_with_a_node_selector_lands_on_the_labelled_node(launcher: Launcher, full: bool) -> None:
    submit(launcher, "anywhere", 1, {})
    key = submit(launcher, "in-b", 1, {"nodeSelector": {"zone": "b"}})
    placed = {a.job: {p.node for p in a.placements} for a in launcher.schedule_pass(full=full).admissions}
    assert placed == {"alice~anywhere": {"n1"}, key: {"n2"}}


def test_a_selector_no_node_matches_waits_naming_the_labels(launcher: Launcher) -> None:
    key = submit(launcher, "in-c", 1, {"nodeSelector": {"zone": "c"}})
    reason = launcher.schedule_pass(full=True).waiting[key]
    assert (reason.code, reason.message) == ("NeverFits", "the cluster has no node with labels zone=c")


def test_nothing_is_placed_beside_a_whole_node_job(launcher: Launcher) -> None:
    """Best fit would put the small jobs on n1, beside the whole-node job's one GPU: an incremental pass (the job it
    started) and a full pass (the job as stored) keep them off."""
    whole = submit(launcher, "whole", 1, {"wholeNodes": True, "nodeSelector": {"zone": "a"}})
    assert [a.job for a in launcher.schedule_pass().admissions] == [whole]
    for name, full in (("small", False), ("small2", True)):
        key = submit(launcher, name, 1, {})
        placed = {a.job: {p.node for p in a.placements} for a in launcher.schedule_pass(full=full).admissions}
        assert placed == {key: {"n2"}}
