"""Who may submit non-preemptible jobs: admins, and whom the configuration's ``nonPreemptible`` names."""

from __future__ import annotations

import pytest

from pai.domain.errors import ForbiddenUserError
from pai.domain.preemptible import ADMINS_ONLY, NonPreemptibleGrant

GRANT = NonPreemptibleGrant.of({"priorityClasses": ["prod"], "users": ["alice"], "groups": ["ops"]})


@pytest.mark.parametrize(("user", "groups", "priority_class", "admin", "allowed"), [
    pytest.param("root", (), "test", True, True, id="an admin"),
    pytest.param("alice", (), "test", False, True, id="a user named"),
    pytest.param("bob", ("default", "ops"), "test", False, True, id="a member of a group named"),
    pytest.param("bob", ("default",), "prod", False, True, id="a job of a class named"),
    pytest.param("bob", ("default",), "test", False, False, id="anyone else"),
])
def test_who_may(user: str, groups: tuple[str, ...], priority_class: str, admin: bool, allowed: bool) -> None:
    assert GRANT.allows(user, groups, priority_class, admin=admin) is allowed


def test_without_the_section_only_admins_may() -> None:
    assert NonPreemptibleGrant.of(None) == ADMINS_ONLY
    assert ADMINS_ONLY.allows("root", (), "prod", admin=True)
    assert not ADMINS_ONLY.allows("alice", ("ops",), "prod")


def test_a_refusal_is_a_403_naming_the_field_and_the_rule() -> None:
    with pytest.raises(ForbiddenUserError) as caught:
        GRANT.require("bob", ("default",), "test")
    error = caught.value
    assert (error.status, error.field) == (403, "extras.preemptible")
    assert error.to_body() == {
        "code": "ForbiddenUserError",
        "message": "extras.preemptible: user bob may not submit a non-preemptible job of priority class 'test' "
                   "(the cluster's nonPreemptible allows admins; priority classes prod; users alice; groups ops)"}
