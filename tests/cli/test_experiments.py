"""``pai experiment create|list|show|stop|metrics`` against a real master (its app on a real port, SQLite, its loop
ticking in this test's event loop); the CLI runs in a thread, as a user's process would beside the master. The
node is an agent played by the test (tests/rest_server/test_experiments.py), so that every report is the test's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient
from click.testing import CliRunner, Result

from pai.cli.main import cli
from pai.rest_server.app import make_app
from pai.rest_server.config import MasterConfig
from pai.store import credentials
from tests.eventually import eventually
from tests.rest_server.conftest import ADMIN_PASSWORD, AGENT_TOKEN, Api
from tests.rest_server.test_experiments import create, experiment, report_of, starts, trials_when
from tests.rest_server.test_nodes import heartbeat
from tests.rest_server.test_vcs import add_node


@pytest.fixture
async def api(tmp_path: Path, config_file: Path, monkeypatch: pytest.MonkeyPatch,
              aiohttp_client: Callable[[web.Application], Awaitable[TestClient[Any, Any]]]) -> AsyncIterator[Api]:
    """A real master, and a config file as `pai login` leaves it: admin, logged in to it."""
    monkeypatch.setattr(credentials, "DEFAULT_PARAMS", credentials.ScryptParams(n=2**4, r=8, p=1))
    config = MasterConfig(data_dir=tmp_path / "data", admin_password=ADMIN_PASSWORD, agent_token=AGENT_TOKEN,
                          tick_seconds=0.05)
    client = await aiohttp_client(make_app(config))
    a = Api(client)
    token = await a.login()
    config_file.parent.mkdir(parents=True, exist_ok=True)
    url = str(client.make_url("")).rstrip("/")
    config_file.write_text(json.dumps({"master": url, "user": "admin", "token": token}))
    yield a


async def pai(*args: str | Path) -> Result:
    """``pai ARGS`` in a thread: the master answers on this thread's event loop meanwhile."""
    return await asyncio.to_thread(CliRunner().invoke, cli, [str(a) for a in args], catch_exceptions=False)


async def report(api: Api, start: dict[str, Any], step: int, **values: float) -> None:
    env = start["env"]
    status, body = await api.call("POST", f"/api/v2/trials/{env['PAI_TRIAL_ID']}/metrics",
                                  json_body={"step": step, "metrics": values}, token=env["PAI_TRIAL_TOKEN"])
    assert status == 200, body


async def running_trials(api: Api) -> dict[int, dict[str, Any]]:
    """The two trials of admin~lr started on node n1 and RUNNING: their start commands by trial number."""
    trials = await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    await add_node(api, "n1")
    commands = await starts(api, "n1", [])
    await heartbeat(api, "n1", [report_of(c) for c in commands])
    await trials_when(api, lambda ts: all(t["state"] == "RUNNING" for t in ts), "both trials running")
    number = {t["id"]: t["number"] for t in trials}
    return {number[int(c["env"]["PAI_TRIAL_ID"])]: c for c in commands}


def lines(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


async def test_create_from_a_yaml_file_prints_the_key_and_the_list_shows_it(api: Api, tmp_path: Path) -> None:
    doc = tmp_path / "lr.yaml"
    doc.write_text(yaml.safe_dump(experiment(maxTrials=3)))
    result = await pai("experiment", "create", doc)
    assert (result.exit_code, result.stdout) == (0, "admin~lr\n"), result.output
    assert result.stderr == "its trials: pai experiment show lr\n"
    await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    assert (await pai("experiment", "list")).stdout == (await pai("experiment", "list", "--user", "admin")).stdout
    assert lines(await pai("experiment", "list")) == [
        "NAME      STATE   SEARCHER           TRIALS     BEST",
        "admin~lr  ACTIVE  random (min loss)  2 waiting  -",
    ]
    raw = json.loads((await pai("experiment", "list", "--json")).stdout)
    assert [(e["key"], e["trialCounts"]) for e in raw] == [("admin~lr", {"WAITING": 2})]
    assert lines(await pai("experiment", "list", "--user", "bob")) == ["NAME  STATE  SEARCHER  TRIALS  BEST"]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
async def test_a_bad_document_prints_the_masters_400_and_creates_nothing(api: Api, tmp_path: Path,
                                                                        suffix: str) -> None:
    doc = experiment()
    doc["hyperparameters"]["lr"]["minval"] = 0
    path = tmp_path / f"bad{suffix}"
    path.write_text(json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc))
    result = await pai("experiment", "create", path)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith("error: InvalidProtocolError: hyperparameters.lr.minval: "), result.stderr
    assert len(result.stderr.splitlines()) == 1
    status, listed = await api.call("GET", "/api/v2/experiments")
    assert (status, listed) == (200, [])


async def test_show_sorts_by_the_best_metric_and_marks_the_best_trial(api: Api) -> None:
    await create(api, experiment())
    start = await running_trials(api)
    await report(api, start[0], 1, loss=0.9)
    await report(api, start[0], 2, loss=0.7)
    await report(api, start[1], 1, loss=0.5)
    await report(api, start[1], 2, loss=0.6)
    detail = await trials_when(api, lambda ts: all(t["latest"] and t["latest"]["step"] == 2 for t in ts), "reports")
    lr = {t["number"]: f"{t['hparams']['lr']:.6g}" for t in detail}
    out = lines(await pai("experiment", "show", "lr"))
    header = out[:8]
    assert header[0] == "Experiment: admin~lr" and header[1] == "State: ACTIVE"
    assert header[2:5] == ["Searcher: random (at most 2 trials, 2 at a time)", "Metric: loss (smaller is better)",
                           "VC: default"]
    assert header[5].startswith("Created: 20") and header[6:8] == ["Ended: -", ""]
    table = [line.split() for line in out[8:11]]
    assert table == [
        ["#", "JOB", "STATE", "batch", "lr", "LATEST", "BEST"],  # hyperparameters as posted (YAML sorted them)
        ["1*", "admin~lr-trial-1", "RUNNING", "64", lr[1], "0.6", "(step", "2)", "0.5", "(step", "1)"],
        ["0", "admin~lr-trial-0", "RUNNING", "64", lr[0], "0.7", "(step", "2)", "0.7", "(step", "2)"],
    ]
    assert out[11:] == ["", "* best: trial 1, loss 0.5 (step 1)"]
    by_number = lines(await pai("experiment", "show", "admin~lr", "--sort", "number"))
    assert [line.split()[0] for line in by_number[9:11]] == ["0", "1*"]
    raw = json.loads((await pai("experiment", "show", "lr", "--json")).stdout)
    assert raw == await _detail(api) and raw["bestTrial"]["number"] == 1
    listed = lines(await pai("experiment", "list"))
    assert listed[1].split() == ["admin~lr", "ACTIVE", "random", "(min", "loss)", "2", "running", "0.5", "(#1)"]


async def _detail(api: Api, key: str = "admin~lr") -> dict[str, Any]:
    status, body = await api.call("GET", f"/api/v2/experiments/{key}")
    assert status == 200, body
    return dict(body)


async def test_a_trial_the_searcher_stopped_says_so_and_its_metrics_show(api: Api) -> None:
    """ASHA, maxTime 4, divisor 2: of two trials at its first rung (step 1), it stops the worse."""
    await create(api, experiment("asha", "asha", maxTime=4, divisor=2, smallerIsBetter=False, metric="acc"))
    trials = await trials_when(api, lambda ts: len(ts) == 2, "two trials", "admin~asha")
    await add_node(api, "n1")
    commands = await starts(api, "n1", [])
    await heartbeat(api, "n1", [report_of(c) for c in commands])
    start = {next(t["number"] for t in trials if t["id"] == int(c["env"]["PAI_TRIAL_ID"])): c for c in commands}
    await report(api, start[0], 0, acc=0.5)
    await report(api, start[0], 1, acc=0.8, loss=1.0)
    await report(api, start[1], 1, acc=0.2, loss=3.0)  # the rung's second, and worse: stopped
    await trials_when(api, lambda ts: ts[1]["stopRequested"], "trial 1 asked to stop", "admin~asha")

    async def stop_sent() -> bool:
        sent = cast(list[dict[str, Any]], (await heartbeat(api, "n1", [report_of(c) for c in commands]))["commands"])
        return start[1]["attemptId"] in [c["attemptId"] for c in sent if c["type"] == "stop"]
    await eventually(stop_sent, what="trial 1's task stopped")
    await heartbeat(api, "n1", [report_of(start[0]), report_of(start[1], "exited", 143)])
    await trials_when(api, lambda ts: ts[1]["state"] == "STOPPED", "trial 1 STOPPED", "admin~asha")

    out = lines(await pai("experiment", "show", "asha"))
    assert "Metric: acc (larger is better)" in out
    rows = [line.split()[:4] for line in out if line.startswith(("0", "1"))]
    assert rows == [["0*", "admin~asha-trial-0", "RUNNING", rows[0][3]],
                    ["1", "admin~asha-trial-1", "STOPPED", "(searcher)"]]
    assert lines(await pai("experiment", "metrics", "asha", "0")) == [
        "STEP  acc  loss",
        "0     0.5  -",
        "1     0.8  1",
    ]
    assert lines(await pai("experiment", "metrics", "admin~asha", "0", "--metric", "loss")) == ["STEP  loss", "1     1"]
    raw = json.loads((await pai("experiment", "metrics", "asha", "1", "-o", "json")).stdout)
    assert raw == {"trialId": int(start[1]["env"]["PAI_TRIAL_ID"]), "experiment": "admin~asha", "number": 1,
                   "metrics": {"acc": [[1, 0.2]], "loss": [[1, 3.0]]}}
    result = await pai("experiment", "metrics", "asha", "7")
    assert (result.exit_code, result.stderr) == (1, "error: experiment admin~asha has no trial 7 (its trials: 0, 1)\n")


async def test_metrics_of_a_trial_that_reported_nothing_say_so(api: Api) -> None:
    await create(api, experiment())
    await trials_when(api, lambda ts: len(ts) == 2, "two trials")
    assert lines(await pai("experiment", "metrics", "lr", "0")) == ["trial 0 of admin~lr has reported no metrics yet"]


async def test_stop_stops_the_experiment_and_its_trials(api: Api) -> None:
    await create(api, experiment())
    await running_trials(api)
    result = await pai("experiment", "stop", "lr")
    assert (result.exit_code, result.stdout) == (0, "experiment admin~lr is stopping: its trials are being stopped\n")

    async def stopping() -> list[str] | None:
        out = lines(await pai("experiment", "list"))
        return out if out[1].split()[1] in ("STOPPING", "STOPPED") else None
    await eventually(stopping, what="the experiment stopping")
    assert (await _detail(api))["stopRequested"] is True


async def test_an_unknown_experiment_and_a_bare_name_without_a_user_are_one_line_errors(
        api: Api, config_file: Path) -> None:
    result = await pai("experiment", "show", "bob~nosuch")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith("error: NoExperimentError: ") and "bob~nosuch" in result.stderr
    result = await pai("experiment", "stop", "nosuch")
    assert result.exit_code == 1 and "NoExperimentError" in result.stderr and "admin~nosuch" in result.stderr
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({"master": config["master"], "token": config["token"]}))
    result = await pai("experiment", "show", "lr")
    assert result.exit_code == 1
    assert result.stderr == ("error: cannot tell whose experiment 'lr' is: give it as user~experiment, "
                             "or log in with `pai login`\n")
