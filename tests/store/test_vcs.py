from __future__ import annotations

import pytest

from pai.domain.errors import NoVirtualClusterError
from pai.store import vcs
from pai.store.db import Database
from pai.store.vcs import VcStatus


def test_put_keeps_order_and_status_and_replaces_the_spec(db: Database) -> None:
    with db.session() as s:
        vcs.put_vc(s, {"name": "a", "guaranteed": {"gpu": "50%"}}, 1.0)
        vcs.put_vc(s, {"name": "b"}, 2.0, VcStatus.DRAINING)
        vcs.put_vc(s, {"name": "a", "guaranteed": {"gpu": 4}}, 3.0)
    with db.session() as s:
        got = vcs.list_vcs(s)
    assert [(v.name, v.status, v.spec) for v in got] == [
        ("a", VcStatus.RUNNING, {"name": "a", "guaranteed": {"gpu": 4}}),
        ("b", VcStatus.DRAINING, {"name": "b"}),
    ]
    assert got[0].updated_at == 3.0


def test_status_delete_and_missing(db: Database) -> None:
    with db.session() as s:
        vcs.put_vc(s, {"name": "a"}, 1.0)
        assert vcs.set_vc_status(s, "a", VcStatus.STOPPED, 2.0).status is VcStatus.STOPPED
        vcs.delete_vc(s, "a")
        assert vcs.list_vcs(s) == []
        for call in (lambda: vcs.get_vc(s, "a"), lambda: vcs.delete_vc(s, "a"),
                     lambda: vcs.set_vc_status(s, "a", VcStatus.RUNNING, 3.0)):
            with pytest.raises(NoVirtualClusterError):
                call()


def test_settings_round_trip(db: Database) -> None:
    with db.session() as s:
        assert vcs.get_setting(s, "scheduler") is None
        vcs.put_setting(s, "scheduler", {"minRunSeconds": 60})
        vcs.put_setting(s, "scheduler", {"minRunSeconds": 30})
    with db.session() as s:
        assert vcs.get_setting(s, "scheduler") == {"minRunSeconds": 30}


@pytest.mark.parametrize(("status", "accepts", "admits"), [
    (VcStatus.RUNNING, True, True), (VcStatus.DRAINING, False, True), (VcStatus.STOPPED, False, False)])
def test_status_behaviour(status: VcStatus, accepts: bool, admits: bool) -> None:
    assert (status.accepts_jobs(), status.admits_jobs()) == (accepts, admits)
