"""Experiments over REST against a real master (SQLite and PostgreSQL): trials are jobs, their tasks get their
hyperparameters and token, their reports reach the searcher, which stops the poor ones and ends the search.
The node is an agent played by the test (its heartbeats), so that every exit is the test's choice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from sqlalchemy import event, make_url

from pai.launcher import experiments as runner
from pai.rest_server import reports as batcher_module
from pai.rest_server.keys import DB, LAUNCHER, REPORTS, STORE
from pai.store import trial_reports as reports_module
from pai.store import users
from tests.eventually import eventually
from tests.rest_server.conftest import Api
from tests.rest_server.test_nodes import heartbeat
from tests.rest_server.test_vcs import add_node

YAML = "text/yaml"


def experiment(name: str = "lr", searcher: str = "random", **fields: Any) -> dict[str, Any]:
    return {
        "protocolVersion": 2, "name": name, "type": "experiment",
        "searcher": {"name": searcher, "metric": "loss", "maxTrials": 2, "maxConcurrentTrials": 2, **fields},
        "hyperparameters": {"lr": {"type": "log", "minval": 0.001, "maxval": 1.0},
                            "batch": {"type": "const", "val": 64}},
        "trial": {
            "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "busybox"}],
            "taskRoles": {"train": {
                "dockerImage": "img", "resourcePerInstance": {"cpu": 1, "gpu": 0, "memoryMB": 256},
                "commands": ["python3 train.py --lr <% $hparams.lr %> --batch <% $hparams.batch %>"]}},
        },
    }


async def create(api: Api, doc: dict[str, Any]) -> tuple[int, Any]:
    return await api.call("POST", "/api/v2/experiments", body=yaml.safe_dump(doc), content_type=YAML)


async def detail(api: Api, key: str = "admin~lr") -> dict[str, Any]:
    status, body = await api.call("GET", f"/api/v2/experiments/{key}")
    assert status == 200, body
    return dict(body)


async def trials_when(api: Api, test: Any, what: str, key: str = "admin~lr") -> list[dict[str, Any]]:
    async def probe() -> list[dict[str, Any]] | None:
        trials = (await detail(api, key))["trials"]
        return trials if test(trials) else None
    return await eventually(probe, what=what)


async def starts(api: Api, node: str, running: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Heartbeat as ``node`` with ``running`` reports until the master sends start commands; those."""
    async def probe() -> list[dict[str, Any]] | None:
        reply = await heartbeat(api, node, running)
        found = [c for c in reply["commands"] if c["type"] == "start"]  # type: ignore[union-attr,index]
        return found or None
    return await eventually(probe, what="start commands")


@contextlib.asynccontextmanager
async def writer_held(api: Api) -> AsyncIterator[None]:
    """The app's writer thread busy with a call of the test's until the block ends."""
    busy, release = threading.Event(), threading.Event()
    held = asyncio.create_task(api.client.app[STORE].call(lambda: (busy.set(), release.wait(20))))
    assert await asyncio.to_thread(busy.wait, 10)
    try:
        yield
    finally:
        release.set()
        await held


def report_of(start: dict[str, Any], status: str = "running", exit_code: int | None = None) -> dict[str, Any]:
    return {"attemptId": start["attemptId"], "jobKey": start["jobKey"], "role": start["role"], "index": start["index"],
            "status": status, "exitCode": exit_code}


async def test_an_experiment_runs_its_trials_as_jobs_with_their_hyperparameters(api: Api) -> None:
    status, body = await create(api, experiment())
    assert (status, body["experimentName"]) == (202, "admin~lr")
    trials = await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    assert [t["jobName"] for t in trials] == ["admin~lr-trial-0", "admin~lr-trial-1"]
    assert all(t["state"] == "WAITING" and t["hparams"]["batch"] == 64 for t in trials)
    assert all(0.001 <= t["hparams"]["lr"] <= 1.0 for t in trials)
    status, job = await api.call("GET", "/api/v2/jobs/admin~lr-trial-0")
    assert status == 200 and job["jobStatus"]["virtualCluster"] == "default"
    assert job["experiment"] == {"name": "admin~lr", "trialNumber": 0, "trialId": trials[0]["id"]}  # linked both ways
    plain = {"protocolVersion": 2, "name": "plain", "type": "job", **experiment()["trial"]}
    status, body = await api.call("POST", "/api/v2/jobs", body=yaml.safe_dump(plain), content_type=YAML)
    assert status == 400 and "$hparams" in body["message"]  # a job that is no trial has no hyperparameters
    plain["taskRoles"]["train"]["commands"] = ["python3 train.py"]
    status, _ = await api.call("POST", "/api/v2/jobs", body=yaml.safe_dump(plain), content_type=YAML)
    assert status == 202 and (await api.call("GET", "/api/v2/jobs/admin~plain"))[1]["experiment"] is None
    await add_node(api, "n1")
    everything = await starts(api, "n1", [])
    commands = [c for c in everything if c["jobKey"] != "admin~plain"]
    assert len(commands) == 2 and all("PAI_TRIAL_TOKEN" not in c["env"] for c in everything if c not in commands)
    by_trial = {int(c["env"]["PAI_TRIAL_ID"]): c for c in commands}
    for trial in trials:
        env = by_trial[trial["id"]]["env"]
        assert json.loads(env["PAI_TRIAL_HPARAMS"]) == trial["hparams"]
        assert len(env["PAI_TRIAL_TOKEN"]) > 20
        assert by_trial[trial["id"]]["command"].endswith(f"--lr {trial['hparams']['lr']} --batch 64")
    assert by_trial[trials[0]["id"]]["env"]["PAI_TRIAL_TOKEN"] != by_trial[trials[1]["id"]]["env"]["PAI_TRIAL_TOKEN"]
    running = [report_of(c) for c in everything]
    await heartbeat(api, "n1", running)
    await trials_when(api, lambda ts: all(t["state"] == "RUNNING" for t in ts), "both trials running")
    status, again = await create(api, experiment())
    assert (status, again["code"]) == (409, "ConflictExperimentError")


async def test_a_decision_of_many_trials_is_applied_in_slices(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seven new trials in slices of three: three writer transactions, each only if the experiment is where the one
    before left it, and every trial made with its job (ASHA's stops and replacements no longer hold the writer for
    hundreds of milliseconds: reports get in between)."""
    monkeypatch.setattr(runner, "NEW_TRIAL_SLICE", 3)
    parts: list[int] = []
    apply = runner.ExperimentRunner.apply

    def counted(self: runner.ExperimentRunner, work: Any, decision: Any, classes: dict[str, int]) -> Any:
        parts.append(len(decision.new_trials))
        return apply(self, work, decision, classes)

    monkeypatch.setattr(runner.ExperimentRunner, "apply", counted)
    status, _ = await create(api, experiment(maxTrials=7, maxConcurrentTrials=7))
    assert status == 202
    trials = await trials_when(api, lambda ts: len(ts) == 7, "seven trials")
    assert [t["jobName"] for t in trials] == [f"admin~lr-trial-{n}" for n in range(7)]
    assert parts[:3] == [3, 3, 1]


async def test_a_trial_reports_with_its_own_token_only(api: Api) -> None:
    await create(api, experiment())
    trials = await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    await add_node(api, "n1")
    commands = await starts(api, "n1", [])
    token = {int(c["env"]["PAI_TRIAL_ID"]): c["env"]["PAI_TRIAL_TOKEN"] for c in commands}
    first, second = trials[0]["id"], trials[1]["id"]
    path = f"/api/v2/trials/{first}/metrics"
    status, body = await api.call("POST", path, json_body={"step": 1, "metrics": {"loss": 0.5, "acc": 0.1}},
                                  token=token[first])
    assert (status, body) == (200, {"stored": 2, "stop": False})
    status, body = await api.call("POST", path, json_body={"step": 1, "metrics": {"loss": 9.0}}, token=token[first])
    assert (status, body["stored"]) == (200, 0)  # a step reported again keeps its first value
    status, body = await api.call("POST", path, json_body={"step": 2, "metrics": {"loss": 0.4}}, token=token[second])
    assert (status, body["code"]) == (403, "ForbiddenUserError")
    status, body = await api.call("POST", path, json_body={"step": 2, "metrics": {"loss": 0.4}})  # the admin's
    assert (status, body["code"]) == (403, "ForbiddenUserError")
    status, body = await api.call("POST", path, json_body={"step": 2, "metrics": {"loss": "low"}}, token=token[first])
    assert (status, body["code"]) == (400, "InvalidParametersError") and "metrics.loss" in body["message"]
    status, body = await api.call("POST", path, json_body={"step": 2, "metrics": {"loss": 0.3}}, token="nobody")
    assert (status, body["code"]) == (401, "UnauthorizedUserError")
    status, series = await api.call("GET", path)  # the owner reads the curve
    assert status == 200 and series["metrics"] == {"acc": [[1, 0.1]], "loss": [[1, 0.5]]}
    status, body = await api.call("POST", f"/api/v2/trials/{first}/checkpoints", token=token[first],
                                  json_body={"step": 1, "path": "/ckpt/1", "metadata": {"epoch": 0}})
    assert status == 200 and body["path"] == "/ckpt/1"
    status, latest = await api.call("GET", f"/api/v2/trials/{first}/checkpoints/latest", token=token[first])
    assert (status, latest["step"], latest["metadata"]) == (200, 1, {"epoch": 0})
    status, none = await api.call("GET", f"/api/v2/trials/{second}/checkpoints/latest", token=token[second])
    assert (status, none) == (200, None)
    got = {t["id"]: t for t in (await detail(api))["trials"]}
    assert got[first]["latest"] == {"step": 1, "value": 0.5}


async def test_bad_documents_store_nothing(api: Api) -> None:
    doc = experiment()
    doc["hyperparameters"]["lr"]["minval"] = 0
    status, body = await create(api, doc)
    assert (status, body["code"], body["message"].split(":")[0]) == (400, "InvalidProtocolError",
                                                                       "hyperparameters.lr.minval")
    doc = experiment()
    doc["trial"]["taskRoles"]["train"]["commands"] = ["train --x <% $hparams.nosuch %>"]
    status, body = await create(api, doc)
    assert (status, body["code"]) == (400, "InvalidProtocolError") and "nosuch" in body["message"]
    doc = experiment()
    doc["trial"]["defaults"] = {"virtualCluster": "nope"}
    status, body = await create(api, doc)
    assert (status, body["code"]) == (404, "NoVirtualClusterError")
    status, listed = await api.call("GET", "/api/v2/experiments")
    assert (status, listed) == (200, [])
    status, jobs = await api.call("GET", "/api/v2/jobs")
    assert status == 200 and jobs == []


async def test_the_searcher_stops_a_poor_trial_as_stopped_by_the_searcher(api: Api) -> None:
    """ASHA with maxTime 4, divisor 2: its first rung is at step 1; of two trials there, the worse is stopped."""
    doc = experiment("asha", "asha", maxTime=4, divisor=2)
    await create(api, doc)
    trials = await trials_when(api, lambda ts: len(ts) == 2, "two trials", "admin~asha")
    await add_node(api, "n1")
    commands = await starts(api, "n1", [])
    token = {int(c["env"]["PAI_TRIAL_ID"]): c["env"]["PAI_TRIAL_TOKEN"] for c in commands}
    running = [report_of(c) for c in commands]
    await heartbeat(api, "n1", running)
    good, poor = trials[0]["id"], trials[1]["id"]
    for trial, loss in ((good, 0.1), (poor, 5.0)):
        status, _ = await api.call("POST", f"/api/v2/trials/{trial}/metrics", token=token[trial],
                                   json_body={"step": 1, "metrics": {"loss": loss}})
        assert status == 200
    await trials_when(api, lambda ts: {t["id"]: t["stopRequested"] for t in ts} == {good: False, poor: True},
                      "the poor trial asked to stop", "admin~asha")
    status, body = await api.call("POST", f"/api/v2/trials/{poor}/metrics", token=token[poor],
                                  json_body={"step": 2, "metrics": {"loss": 4.0}})
    assert (status, body["stop"]) == (200, True)
    by_trial = {int(c["env"]["PAI_TRIAL_ID"]): c for c in commands}

    async def stop_sent() -> bool:
        reply = await heartbeat(api, "n1", running)
        stops = [c["attemptId"] for c in reply["commands"] if c["type"] == "stop"]  # type: ignore[union-attr,index]
        return by_trial[poor]["attemptId"] in stops
    await eventually(stop_sent, what="the poor trial's task stopped")
    running = [report_of(by_trial[good]), report_of(by_trial[poor], "exited", 143)]
    await heartbeat(api, "n1", running)
    done = await trials_when(api, lambda ts: ts[1]["state"] == "STOPPED", "the poor trial STOPPED", "admin~asha")
    assert done[1]["stoppedBy"] == "searcher" and done[0]["state"] == "RUNNING"
    status, job = await api.call("GET", done[1]["jobName"].join(("/api/v2/jobs/", "")))
    assert job["jobStatus"]["state"] == "STOPPED" and job["jobStatus"]["retries"] == 0


async def test_a_finished_search_is_completed_with_its_best_trial(api: Api) -> None:
    await create(api, experiment())
    await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    await add_node(api, "n1")
    commands = await starts(api, "n1", [])
    for i, c in enumerate(commands):
        trial = int(c["env"]["PAI_TRIAL_ID"])
        status, _ = await api.call("POST", f"/api/v2/trials/{trial}/metrics", token=c["env"]["PAI_TRIAL_TOKEN"],
                                   json_body={"step": 3, "metrics": {"loss": 1.0 + i}})
        assert status == 200
    await heartbeat(api, "n1", [report_of(c, "exited", 0) for c in commands])

    async def completed() -> dict[str, Any] | None:
        got = await detail(api)
        return got if got["state"] == "COMPLETED" else None
    got = await eventually(completed, what="the experiment COMPLETED")
    best = int(commands[0]["env"]["PAI_TRIAL_ID"])
    assert got["bestTrial"]["id"] == best and got["bestTrial"]["metric"] == {"step": 3, "value": 1.0}
    assert got["trialCounts"] == {"COMPLETED": 2} and got["completedTime"] is not None


async def test_stopping_an_experiment_stops_its_trials(api: Api) -> None:
    await create(api, experiment())
    await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    await api.write(lambda s: users.create_user(s, "bob", "bob-password"))
    bob = await api.login("bob", "bob-password")
    api.token = None
    status, body = await api.call("PUT", "/api/v2/experiments/admin~lr/executionType", json_body={"value": "STOP"},
                                  token=bob)
    assert (status, body["code"]) == (403, "ForbiddenUserError")
    admin = await api.login()
    status, _ = await api.call("PUT", "/api/v2/experiments/admin~lr/executionType", json_body={"value": "STOP"},
                               token=admin)
    assert status == 202

    async def stopped() -> dict[str, Any] | None:
        got = await detail(api)
        return got if got["state"] == "STOPPED" else None
    got = await eventually(stopped, what="the experiment STOPPED")  # its trials were WAITING: stopped at once
    assert [(t["state"], t["stoppedBy"]) for t in got["trials"]] == [("STOPPED", "user")] * 2
    status, body = await api.call("PUT", "/api/v2/experiments/admin~lr/executionType", json_body={"value": "STOP"})
    assert status == 202 and "ended already" in body["message"]


async def test_a_trial_asked_to_stop_is_written_once_while_its_job_stops(api: Api) -> None:
    """Running trials of a stopped experiment: asked to stop, their jobs STOPPING while their tasks end; the trials
    follow their jobs without a write a tick (who asked them is kept, not written again)."""
    await create(api, experiment())
    await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    await add_node(api, "n1")
    commands = await starts(api, "n1", [])
    await heartbeat(api, "n1", [report_of(c) for c in commands])
    status, _ = await api.call("PUT", "/api/v2/experiments/admin~lr/executionType", json_body={"value": "STOP"})
    assert status == 202
    trials = await trials_when(api, lambda ts: all(t["stopRequested"] for t in ts), "both trials asked to stop")
    assert {t["state"] for t in trials} == {"RUNNING"}  # their tasks have not ended: the jobs are STOPPING
    follow = api.client.app[LAUNCHER].experiments.follow_jobs
    assert [await api.client.app[STORE].call(follow) for _ in range(3)] == [0, 0, 0]
    await heartbeat(api, "n1", [report_of(c, "exited", 143) for c in commands])
    ended = await trials_when(api, lambda ts: all(t["state"] == "STOPPED" for t in ts), "both trials STOPPED")
    assert [t["stoppedBy"] for t in ended] == ["user", "user"]


async def test_the_batches_keep_their_connections_on_sqlite_and_give_them_back(api: Api) -> None:
    """SQLite: the batches stored on the event loop on a connection of their own, those stored on the writer thread
    on another, each kept between batches; at the batcher's close the writer's goes back to the pool and the event
    loop's (its busy timeout is not the engine's) is closed. PostgreSQL: one from the pool each batch, none kept."""
    await create(api, experiment())
    await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    await add_node(api, "n1")
    commands = await starts(api, "n1", [])
    batcher, sqlite = api.client.app[REPORTS], api.client.app[DB].dialect == "sqlite"

    async def reports(step: int) -> None:
        for c in commands:
            status, _ = await api.call("POST", f"/api/v2/trials/{c['env']['PAI_TRIAL_ID']}/metrics",
                                       token=c["env"]["PAI_TRIAL_TOKEN"], json_body={"step": step, "metrics": {"l": 1}})
            assert status == 200

    async def while_the_writer_works(step: int) -> None:
        async with writer_held(api):
            sent = asyncio.create_task(reports(step))
            await eventually(lambda: batcher._draining is not None and not batcher._waiting,
                             what="a batch for the writer")
        await sent

    steps = iter(range(100, 1000))

    async def stored_on_the_loop() -> bool:  # the writer thread is idle most of the time, not always (the loop's ticks)
        await reports(next(steps))
        return batcher._here_connection is not None or not sqlite

    await eventually(stored_on_the_loop, what="a batch stored on the event loop")
    await while_the_writer_works(1)
    here, kept = batcher._here_connection, batcher._connection
    assert (here is not None) == sqlite and (kept is not None) == sqlite
    kept_dbapi = kept.connection.dbapi_connection if kept is not None else None
    pool = api.client.app[DB].engine.pool
    checkins: list[object] = []
    event.listen(pool, "checkin", lambda dbapi, record: checkins.append(dbapi))
    for step in range(2, 5):
        await reports(step)
        await while_the_writer_works(step + 10)
    assert batcher._here_connection is here and batcher._connection is kept  # kept between batches
    assert all(dbapi is not kept_dbapi for dbapi in checkins)
    here_dbapi = here.connection.dbapi_connection if here is not None else None
    await api.client.app[STORE].call(batcher.close)
    assert batcher._connection is None and batcher._here_connection is None
    assert (kept_dbapi in checkins) == sqlite  # the writer's back to the pool (the pool's count of connections out
    # is no measure: the launcher's loop takes some)
    if here_dbapi is not None:  # the event loop's closed
        with pytest.raises(sqlite3.ProgrammingError):
            here_dbapi.execute("SELECT 1")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_on_sqlite_a_file_another_process_holds_locked_does_not_hold_the_event_loop(
        api: Api, db_url: str) -> None:
    """A batch stored on the event loop waits for no lock: while another process holds the database file's write
    lock, the report waits for it on the writer thread and the master goes on answering; once the lock is let go
    the report is stored, once."""
    await create(api, experiment())
    await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    await add_node(api, "n1")
    command = (await starts(api, "n1", []))[0]
    trial, token = command["env"]["PAI_TRIAL_ID"], command["env"]["PAI_TRIAL_TOKEN"]
    other = sqlite3.connect(make_url(db_url).database, isolation_level=None)  # another process's connection
    try:
        other.execute("BEGIN IMMEDIATE")  # the file's write lock
        report = asyncio.create_task(api.call("POST", f"/api/v2/trials/{trial}/metrics", token=token,
                                              json_body={"step": 7, "metrics": {"loss": 0.5}}))
        for _ in range(3):  # the event loop answers meanwhile
            status, _ = await asyncio.wait_for(api.call("GET", f"/api/v2/trials/{trial}/metrics"), 5)
            assert status == 200
        assert not report.done()  # the report waits for the lock
    finally:
        other.rollback()
        other.close()
    assert await asyncio.wait_for(report, 15) == (200, {"stored": 1, "stop": False})
    status, series = await api.call("GET", f"/api/v2/trials/{trial}/metrics?name=loss")
    assert status == 200 and series["metrics"]["loss"] == [[7, 0.5]]


async def test_reports_that_wait_for_the_writer_are_stored_in_one_transaction(api: Api) -> None:
    """While the writer thread is busy, reports gather; they are stored together, each answered as if alone."""
    await create(api, experiment())
    await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    await add_node(api, "n1")
    commands = await starts(api, "n1", [])
    token = {int(c["env"]["PAI_TRIAL_ID"]): c["env"]["PAI_TRIAL_TOKEN"] for c in commands}
    (first, mine), (second, theirs) = sorted(token.items())
    batcher = api.client.app[REPORTS]
    async with writer_held(api):
        before = batcher.batches
        registry = api.client.app[LAUNCHER].metrics.registry
        stored_before = registry.get_sample_value("pai_trial_report_batch_size_sum") or 0.0
        calls = [api.call("POST", f"/api/v2/trials/{trial}/metrics", token=tok,
                          json_body={"step": step, "metrics": {"loss": 1.0 / (step + 1)}})
                 for step in range(10) for trial, tok in ((first, mine), (second, theirs))]
        calls.append(api.call("POST", f"/api/v2/trials/{first}/metrics", token=theirs,
                              json_body={"step": 99, "metrics": {"loss": 0.0}}))
        answers = [asyncio.create_task(c) for c in calls]
        await eventually(lambda: len(batcher._waiting) >= 20, what="the reports waiting for the writer")
    got = await asyncio.gather(*answers)
    assert got[:20] == [(200, {"stored": 1, "stop": False})] * 20
    assert got[20][0] == 403 and got[20][1]["code"] == "ForbiddenUserError"
    assert batcher.batches - before <= 2  # what waited went together (the last may have come after)
    # pai_trial_report_batch_size: the 21 reports (the refused one too: its token was looked up), in those batches
    assert registry.get_sample_value("pai_trial_report_batch_size_sum") - stored_before == 21
    assert registry.get_sample_value("pai_trial_report_batch_size_bucket", {"le": "1.0"}) <= 1
    status, series = await api.call("GET", f"/api/v2/trials/{first}/metrics?name=loss")
    assert status == 200 and [step for step, _ in series["metrics"]["loss"]] == list(range(10))


async def test_on_sqlite_a_report_that_finds_the_writer_idle_is_stored_on_the_event_loop(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite: a batch that finds the writer thread idle is stored in its stead on the event loop's thread (no trip
    to the writer and back: ADR 0003, addendum 2); one that finds it busy waits for it and is stored there.
    PostgreSQL: always on the writer thread (a transaction there waits on the network)."""
    await create(api, experiment())
    await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    await add_node(api, "n1")
    command = (await starts(api, "n1", []))[0]
    trial, token = command["env"]["PAI_TRIAL_ID"], command["env"]["PAI_TRIAL_TOKEN"]
    stored_on: list[int] = []

    def recorded(c: Any, items: Any) -> Any:
        stored_on.append(threading.get_ident())
        return reports_module.report_many(c, items)
    monkeypatch.setattr(batcher_module, "report_many", recorded)

    async def report(step: int) -> tuple[int, Any]:
        return await api.call("POST", f"/api/v2/trials/{trial}/metrics", token=token,
                              json_body={"step": step, "metrics": {"loss": 1.0}})

    for step in range(10):
        assert await report(step) == (200, {"stored": 1, "stop": False})
    here = threading.get_ident()  # the test's thread runs the app's event loop
    sqlite = api.client.app[DB].dialect == "sqlite"
    assert len(stored_on) == 10 and (here in stored_on) == sqlite and (sqlite or set(stored_on) != {here})
    async with writer_held(api):
        waiting = asyncio.create_task(report(10))
        batcher = api.client.app[REPORTS]
        await eventually(lambda: batcher._draining is not None and not batcher._waiting,
                         what="the report handed to the writer thread")
        assert len(stored_on) == 10  # not stored beside the writer's call
    assert await waiting == (200, {"stored": 1, "stop": False})
    assert stored_on[10] != here  # it waited for the writer thread, and was stored there


async def test_a_trial_no_node_could_hold_is_submitted_with_the_warning_in_its_history(api: Api) -> None:
    await add_node(api, "n1", gpu=0, cpu=16)
    doc = experiment()
    doc["trial"]["taskRoles"]["train"]["resourcePerInstance"]["gpu"] = 2
    status, _ = await create(api, doc)
    assert status == 202
    await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    status, job = await api.call("GET", "/api/v2/jobs/admin~lr-trial-0")
    assert status == 200 and job["jobStatus"]["state"] == "WAITING"
    warnings = [e["message"] for e in job["events"] if e["kind"] == "warning"]
    assert warnings == ["taskRoles.train.resourcePerInstance.gpu: asks 2 GPUs per instance; the largest node, n1, "
                        "has 0"]


async def test_an_experiment_whose_owner_was_deleted_is_stopped(api: Api) -> None:
    """A decision with no new trial (maxTrials reached) finds the owner gone: the trial still running is asked to
    stop. The decision follows a trial's end: the trials' admission (RUNNING) may have been decided on before bob
    was deleted, and a task's running report changes nothing of the experiment's progress."""
    await api.write(lambda s: users.create_user(s, "bob", "bob-password"))
    admin = api.token
    await api.login("bob", "bob-password")
    status, _ = await create(api, experiment())
    assert status == 202
    api.token = admin
    await trials_when(api, lambda ts: len(ts) == 2, "two trials", "bob~lr")
    await add_node(api, "n1")
    commands = await starts(api, "n1", [])
    status, _ = await api.call("DELETE", "/api/v2/users/bob")  # an admin's delete: every process's caches hear it
    assert status == 200
    ended, going = sorted(commands, key=lambda c: str(c["jobKey"]))  # trial 0's, trial 1's
    await heartbeat(api, "n1", [report_of(ended, "exited", 0), report_of(going)])  # a trial ended: the searcher looks
    # the running trial is asked to stop; the other one too if the trials' admission was decided on after the
    # delete, else it is COMPLETED
    trials = await trials_when(api, lambda ts: ts[0]["state"] != "RUNNING" and ts[1]["stopRequested"],
                               "the running trial asked to stop, the other one ended", "bob~lr")
    assert trials[0]["state"] in ("COMPLETED", "STOPPED") and trials[1]["state"] == "RUNNING"
    assert trials[0]["stopRequested"] == (trials[0]["state"] == "STOPPED")


async def test_a_trial_whose_job_cannot_be_submitted_fails_and_the_search_goes_on(api: Api) -> None:
    """Trial 0's job name is taken by a job of the user's: its submission fails whole (nothing of it stored, the
    other job untouched), the trial is FAILED, and trial 1 runs as a job."""
    taken = {"protocolVersion": 2, "name": "lr-trial-0", "type": "job", **experiment()["trial"]}
    taken["taskRoles"]["train"]["commands"] = ["echo mine"]
    status, _ = await api.call("POST", "/api/v2/jobs", body=yaml.safe_dump(taken), content_type=YAML)
    assert status == 202
    assert (await create(api, experiment()))[0] == 202
    trials = await trials_when(api, lambda ts: len(ts) == 2 and ts[0]["state"] == "FAILED", "trial 0 failed")
    assert trials[0]["jobName"] is None and trials[1]["state"] == "WAITING"
    assert trials[1]["jobName"] == "admin~lr-trial-1"
    status, mine = await api.call("GET", "/api/v2/jobs/admin~lr-trial-0")
    assert status == 200 and mine["experiment"] is None  # still the user's own job, not the trial's
    status, jobs = await api.call("GET", "/api/v2/jobs?username=admin")
    assert status == 200 and sorted(j["name"] for j in jobs) == ["lr-trial-0", "lr-trial-1"]
