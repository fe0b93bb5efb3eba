"""``extras.nodeSelector`` (the job's, and a role's under ``extras.hivedScheduler.taskRoles.<role>``, merged over it)
and ``extras.wholeNodes``: read from v1 and v2 alike, kept through the store, and no warning."""

from __future__ import annotations

from typing import Any

import pytest

from pai.jobspec import ParsedJob
from pai.store.codec import spec_from_dict, spec_to_dict
from tests.jobspec.builders import parse_v1, parse_v2, v1_job, v1_role, v2_job, v2_role


def both(extras: dict[str, Any]) -> list[ParsedJob]:
    """The same two-role job (worker, ps) with ``extras``, as v1 and as v2."""
    v1 = v1_job(v1_role(), v1_role(name="ps"), extras=extras)
    v2 = v2_job({"worker": v2_role(), "ps": v2_role()}, extras=extras)
    return [parse_v1(v1), parse_v2(v2)]


CASES = [
    ("none: no selector, shared nodes", {}, {}, {"worker": {}, "ps": {}}, False),
    ("the job's selector is every role's", {"nodeSelector": {"zone": "a"}},
     {"zone": "a"}, {"worker": {"zone": "a"}, "ps": {"zone": "a"}}, False),
    ("a role's selector overrides the job's label and adds its own",
     {"nodeSelector": {"zone": "a", "ssd": "yes"},
      "hivedScheduler": {"taskRoles": {"ps": {"nodeSelector": {"zone": "b", "rack": "r1"}}}}},
     {"zone": "a", "ssd": "yes"},
     {"worker": {"zone": "a", "ssd": "yes"}, "ps": {"zone": "b", "ssd": "yes", "rack": "r1"}},
     False),
    ("a role's selector alone", {"hivedScheduler": {"taskRoles": {"worker": {"nodeSelector": {"gpu": "a100"}}}}},
     {}, {"worker": {"gpu": "a100"}, "ps": {}}, False),
    ("values as node labels spell them", {"nodeSelector": {"ssd": True, "rack": 3, "old": False}},
     {"ssd": "true", "rack": "3", "old": "false"},
     {"worker": {"ssd": "true", "rack": "3", "old": "false"}, "ps": {"ssd": "true", "rack": "3", "old": "false"}},
     False),
    ("whole nodes", {"wholeNodes": True}, {}, {"worker": {}, "ps": {}}, True),
    ("wholeNodes false", {"wholeNodes": False}, {}, {"worker": {}, "ps": {}}, False),
]


@pytest.mark.parametrize(("name", "extras", "job_selector", "role_selectors", "whole"), CASES,
                         ids=[c[0] for c in CASES])
def test_read_from_v1_and_v2(name: str, extras: dict[str, Any], job_selector: dict[str, str],
                             role_selectors: dict[str, dict[str, str]], whole: bool) -> None:
    for parsed in both(extras):
        spec = parsed.spec
        assert spec.node_selector == job_selector
        assert {r.name: r.node_selector for r in spec.task_roles} == role_selectors
        assert spec.whole_nodes is whole
        assert parsed.warnings == ()
        assert spec_from_dict(spec_to_dict(spec)) == spec
