"""``POST /api/v2/jobs?dryRun=true`` and ``POST /api/v2/experiments?dryRun=true`` (the dashboard's editor checks a
document as the user types): the submission's own parsing and checks, 200 and nothing stored when it passes, the
submission's error otherwise, with the line of the document where the field at fault is written. A real submission's
error carries the same line. And ``GET /api/v2/job-templates``: the shipped examples, each one a dry run accepts."""

from __future__ import annotations

import json
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import yaml

from pai.rest_server.templates import templates
from tests.rest_server.conftest import Api
from tests.rest_server.test_experiments import experiment

YAML = "text/yaml"
JOB = """protocolVersion: 2
name: dry
type: job
prerequisites:
  - {type: dockerimage, name: img, uri: busybox}
taskRoles:
  worker:
    instances: 1
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: ["true"]
defaults:
  virtualCluster: default
"""  # line 7: worker, 10: resourcePerInstance, 13: virtualCluster
V1 = {"jobName": "dry1", "image": "busybox", "virtualCluster": "default", "taskRoles": [
    {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "true"}]}


async def jobs_stored(api: Api) -> int:
    status, page = await api.call("GET", "/api/v2/jobs?withTotalCount=true")
    assert status == 200
    return int(page["totalCount"])


async def test_a_valid_job_answers_200_and_nothing_is_stored(api: Api) -> None:
    status, answer = await api.call("POST", "/api/v2/jobs?dryRun=true", body=JOB, content_type=YAML)
    assert status == 200, answer
    assert (answer["jobName"], answer["dryRun"], answer["protocolVersion"], answer["warnings"]) == \
        ("admin~dry", True, 2, [])
    status, answer = await api.call("POST", "/api/v2/jobs?dryRun=true", json_body=V1)
    assert (status, answer["jobName"], answer["protocolVersion"]) == (200, "admin~dry1", 1)
    assert await jobs_stored(api) == 0
    assert (await api.call("GET", "/api/v2/jobs/admin~dry"))[0] == 404
    status, answer = await api.call("POST", "/api/v2/jobs?dryRun=false", body=JOB, content_type=YAML)
    assert (status, answer["jobName"]) == (202, "admin~dry")  # the same document, submitted
    assert await jobs_stored(api) == 1


BAD_JOBS = [
    # (what, document, code, field the message names, line)
    ("a negative GPU count", JOB.replace("gpu: 0", "gpu: -1"), "InvalidProtocolError",
     "taskRoles.worker.resourcePerInstance.gpu", 10),
    ("a field the protocol lacks", JOB.replace("    instances: 1\n", "    instances: 1\n    gpuz: 2\n"),
     "InvalidProtocolError", "taskRoles.worker.gpuz", 9),
    ("a missing field", JOB.replace('    commands: ["true"]\n', ""), "InvalidProtocolError",
     "taskRoles.worker.commands", 7),  # the role's line
    ("a VC that does not exist", JOB.replace("virtualCluster: default", "virtualCluster: nope"),
     "NoVirtualClusterError", "virtualCluster", 13),
    ("broken YAML", JOB.replace("    dockerImage: img", "    dockerImage: [img"), "InvalidProtocolError",
     "malformed YAML", 10),  # where the parser finds it broken
    ("a v1 job's task role", json.dumps({**V1, "taskRoles": [{**V1["taskRoles"][0], "gpuNumber": "two"}]}, indent=2),
     "InvalidProtocolError", "taskRoles[0].gpuNumber", 11),
]


@pytest.mark.parametrize(("what", "doc", "code", "field", "line"), BAD_JOBS, ids=[b[0] for b in BAD_JOBS])
async def test_an_invalid_job_is_refused_as_a_submission_is_with_its_line(api: Api, what: str, doc: str, code: str,
                                                                          field: str, line: int) -> None:
    dry = await api.call("POST", "/api/v2/jobs?dryRun=true", body=doc, content_type=YAML)
    assert dry[0] in (400, 404), dry
    assert (dry[1]["code"], dry[1]["line"]) == (code, line), dry
    assert field in dry[1]["message"]
    assert await jobs_stored(api) == 0
    real = await api.call("POST", "/api/v2/jobs", body=doc, content_type=YAML)
    assert real == dry  # the same answer, status and body: the same checks
    assert await jobs_stored(api) == 0


async def test_a_name_taken_is_a_conflict_at_the_names_line(api: Api) -> None:
    assert (await api.call("POST", "/api/v2/jobs", body=JOB, content_type=YAML))[0] == 202
    dry = await api.call("POST", "/api/v2/jobs?dryRun=true", body=JOB, content_type=YAML)
    assert (dry[0], dry[1]["code"], dry[1]["line"]) == (409, "ConflictJobError", 2)
    assert await api.call("POST", "/api/v2/jobs", body=JOB, content_type=YAML) == dry
    assert await jobs_stored(api) == 1
    status, answer = await api.call("POST", "/api/v2/jobs?dryRun=true", json_body={**V1, "jobName": "dry"})
    assert (status, answer["code"], answer["line"]) == (409, "ConflictJobError", 1)  # JSON on one line: jobName's


async def test_dry_run_takes_true_or_false(api: Api) -> None:
    status, answer = await api.call("POST", "/api/v2/jobs?dryRun=maybe", body=JOB, content_type=YAML)
    assert (status, answer["code"]) == (400, "InvalidParametersError") and "dryRun" in answer["message"]
    assert "line" not in answer
    assert await jobs_stored(api) == 0


async def experiments_stored(api: Api) -> list[Any]:
    status, listed = await api.call("GET", "/api/v2/experiments")
    assert status == 200
    return list(listed)


async def test_an_experiment_dry_run_stores_nothing_and_names_its_errors_line(api: Api) -> None:
    text = yaml.safe_dump(experiment(), sort_keys=False)
    status, answer = await api.call("POST", "/api/v2/experiments?dryRun=true", body=text, content_type=YAML)
    assert (status, answer["experimentName"], answer["dryRun"]) == (200, "admin~lr", True), answer
    assert await experiments_stored(api) == []
    bad = text.replace("maxTrials: 2", "maxTrials: 0")
    status, answer = await api.call("POST", "/api/v2/experiments?dryRun=true", body=bad, content_type=YAML)
    lines = bad.splitlines()
    assert (status, answer["code"]) == (400, "InvalidProtocolError") and "searcher.maxTrials" in answer["message"]
    assert "maxTrials: 0" in lines[answer["line"] - 1]
    elsewhere = yaml.safe_dump({**experiment(), "trial": {**experiment()["trial"],
                                                          "defaults": {"virtualCluster": "nope"}}}, sort_keys=False)
    status, answer = await api.call("POST", "/api/v2/experiments?dryRun=true", body=elsewhere, content_type=YAML)
    assert (status, answer["code"]) == (404, "NoVirtualClusterError")
    assert "virtualCluster: nope" in elsewhere.splitlines()[answer["line"] - 1]  # trial.defaults' own line
    assert await experiments_stored(api) == []
    assert (await api.call("POST", "/api/v2/experiments", body=text, content_type=YAML))[0] == 202
    dry = await api.call("POST", "/api/v2/experiments?dryRun=true", body=text, content_type=YAML)
    assert (dry[0], dry[1]["code"], dry[1]["line"]) == (409, "ConflictExperimentError", 2)  # name's
    assert await api.call("POST", "/api/v2/experiments", body=text, content_type=YAML) == dry
    assert len(await experiments_stored(api)) == 1


async def test_every_template_is_a_document_a_dry_run_accepts(api: Api) -> None:
    status, shipped = await api.call("GET", "/api/v2/job-templates")
    assert status == 200
    names = {t["name"]: t for t in shipped}
    assert {"hello-v1", "hello-v2", "experiment"} <= set(names)
    assert (names["experiment"]["kind"], names["hello-v1"]["syntax"]) == ("experiment", "json")
    assert "torch-allreduce" not in names  # its relative codeDir is for `pai submit`, which uploads it
    for t in shipped:
        path = "/api/v2/experiments" if t["kind"] == "experiment" else "/api/v2/jobs"
        ctype = "application/json" if t["syntax"] == "json" else YAML
        status, answer = await api.call("POST", f"{path}?dryRun=true", body=t["text"], content_type=ctype)
        assert status == 200, (t["name"], answer)
    assert await jobs_stored(api) == 0 and await experiments_stored(api) == []


def test_the_templates_are_the_repositorys_examples_and_ship_in_the_wheel() -> None:
    root = Path(__file__).resolve().parents[2]
    assert (root / "pai" / "rest_server" / "examples").resolve() == root / "examples"
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "pai.rest_server"]
    files = [t["file"] for t in templates()]
    assert files and all(any(fnmatch(f"examples/{f}", p) for p in patterns) for f in files)
    assert all(t["text"] == (root / "examples" / t["file"]).read_text() for t in templates())
