"""The cached cluster configuration: kept between reads, dropped by writes, never kept stale after a race."""

from __future__ import annotations

from pai.launcher import cluster
from pai.launcher.vcadmin import VcAdmin
from pai.store.db import Database
from pai.store.vcs import VcStatus


def test_the_configuration_is_kept_until_a_write_invalidates_it(db: Database) -> None:
    cache = cluster.ClusterCache()
    admin = VcAdmin(db, lambda: 1.0, cache)
    with db.session() as s:
        first = cache.get(s)
    with db.session() as s:
        assert cache.get(s) is first  # kept between reads
    assert first.config.priority_classes.get("crit") is None
    with db.session() as s:  # a change behind the master's back (no generation bumped): not seen until invalidated
        cluster.apply_file(s, {"priorityClasses": {"crit": 200}}, 1.0)
    with db.session() as s:
        assert cache.get(s) is first
    admin.set_status("default", VcStatus.DRAINING)  # any write through VcAdmin bumps the generation
    with db.session() as s:
        now = cache.get(s)
    assert now is not first
    assert now.config.priority_classes["crit"] == 200 and now.vc_status("default") is VcStatus.DRAINING
    with db.session() as s:
        assert cache.get(s) is now


def test_a_load_that_raced_with_an_invalidation_is_used_once_and_not_kept(db: Database, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    cache = cluster.ClusterCache()
    real_load = cluster.load

    def load_then_write(s):  # type: ignore[no-untyped-def]
        loaded = real_load(s)  # what the store held when this reader started
        with db.session() as w:
            cluster.apply_file(w, {"priorityClasses": {"crit": 200}}, 1.0)
        cache.invalidate()  # the writer commits and invalidates while the reader is still loading
        return loaded

    monkeypatch.setattr(cluster, "load", load_then_write)
    with db.session() as s:
        stale = cache.get(s)
    assert "crit" not in stale.config.priority_classes
    monkeypatch.setattr(cluster, "load", real_load)
    with db.session() as s:
        assert cache.get(s).config.priority_classes["crit"] == 200
