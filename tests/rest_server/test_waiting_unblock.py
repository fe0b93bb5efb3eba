"""A waiting job's reason over REST says which running job would unblock it, and when: from that job's
``extras.expectedDurationSeconds``, else from the typical run time of its user's jobs in its VC."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from pai.domain.states import JobState
from pai.store import jobs
from pai.store.db import Database
from tests.eventually import eventually
from tests.rest_server.conftest import Api
from tests.rest_server.test_vcs import add_node, job
from tests.store import builders


async def _waiting_behind_long(api: Api, long: dict[str, Any]) -> dict[str, Any]:
    """Run ``long`` (3 of the node's 4 GPUs), then submit ``next`` (4 GPUs): its reason, once it has a hint."""
    await add_node(api, gpu=4)
    await api.call("POST", "/api/v2/jobs", body=json.dumps(long), content_type="application/json")

    async def running() -> bool:
        return bool((await api.call("GET", "/api/v2/jobs/admin~long"))[1]["jobStatus"]["state"] == "RUNNING")

    await eventually(running, what="admin~long admitted")
    await api.call("POST", "/api/v2/jobs", body=job("next", gpu=4), content_type="application/json")

    async def reason() -> dict[str, Any] | None:
        r: dict[str, Any] | None = (await api.call("GET", "/api/v2/jobs/admin~next"))[1]["jobStatus"]["waitingReason"]
        return r if r and "unblock" in r["figures"] else None

    got: dict[str, Any] = await eventually(reason, what="admin~next's reason with what would unblock it")
    unblock = got["figures"]["unblock"]
    assert (unblock["kind"], unblock["node"], unblock["have"], unblock["need"], unblock["jobs"]) == (
        "nodeGpus", "n1", 1, 4, ["admin~long"])
    return got


async def test_the_declared_duration_of_the_running_job_reaches_the_waiting_reason(api: Api) -> None:
    long = json.loads(job("long", gpu=3))
    long["extras"] = {"expectedDurationSeconds": 7200}
    before = time.time()
    got = await _waiting_behind_long(api, long)
    unblock = got["figures"]["unblock"]
    assert before + 7200 <= unblock["eta"] <= time.time() + 7200
    assert unblock["etaFrom"] == "declared"
    assert got["message"].endswith("3 more GPUs on n1 would do: it would start once admin~long exits "
                                   f"(about {time.strftime('%H:%M', time.gmtime(unblock['eta']))} UTC)")


async def test_without_a_declared_duration_the_users_typical_run_time_in_the_vc_serves(api: Api, db_url: str) -> None:
    """admin's last successful jobs in VC default ran 1000, 3000 and 2000 seconds: ``long`` should run 2000."""
    db = Database(db_url)
    try:
        with db.session() as s:
            for k, run in enumerate((1000, 3000, 2000)):
                done = builders.job(f"done-{k}", "admin", state=JobState.SUCCEEDED)
                jobs.insert_job(s, replace(done, started_at=1e9 + k - run, completed_at=1e9 + k), "{}")
    finally:
        db.dispose()
    before = time.time()
    got = await _waiting_behind_long(api, json.loads(job("long", gpu=3)))
    unblock = got["figures"]["unblock"]
    assert before + 2000 <= unblock["eta"] <= time.time() + 2000
    assert unblock["etaFrom"] == "typical"
    assert got["message"].endswith("it would start once admin~long exits "
                                   f"(about {time.strftime('%H:%M', time.gmtime(unblock['eta']))} UTC, "
                                   "by typical run times)")
