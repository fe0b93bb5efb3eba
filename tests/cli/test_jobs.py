"""pai jobs, pai job show|config, pai logs, pai stop against a real HTTP server."""

from __future__ import annotations

import json

import pytest

from .builders import T0, job_detail, job_summary, task_status
from .conftest import Run
from .fake_master import FakeMaster

JOBS = "/api/v2/jobs"
MNIST = "/api/v2/jobs/admin~mnist"


def test_jobs_table_lists_the_logged_in_users_jobs_newest_first(run: Run, logged_in: FakeMaster) -> None:
    done = job_summary("old", state="SUCCEEDED", retries=1, completedTime=T0 + 60_000, totalGpuNumber=0)
    logged_in.reply("GET", JOBS, {"totalCount": 2, "data": [job_summary("mnist"), done]})
    result = run("jobs")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "NAME         STATE      VC       RETRIES  GPU  TASKS  SUBMITTED            COMPLETED",
        "admin~mnist  RUNNING    default  0        2    3      2023-11-14 22:13:20  -",
        "admin~old    SUCCEEDED  default  1        0    3      2023-11-14 22:13:20  2023-11-14 22:14:20",
    ]
    query = logged_in.only("GET", JOBS).query
    assert query == {"username": "admin", "limit": "50", "order": "desc", "withTotalCount": "true"}


def test_jobs_says_when_the_list_is_cut(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("GET", JOBS, {"totalCount": 7, "data": [job_summary("a"), job_summary("b")]})
    result = run("jobs", "--limit", "2")
    assert result.stdout.splitlines()[-1] == "(2 of 7 jobs; use --limit to see more)"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--all"], {}, id="all-users"),
        pytest.param(["--user", "bob"], {"username": "bob"}, id="other-user"),
        pytest.param(["--vc", "dev", "--state", "waiting", "--keyword", "mn"],
                     {"username": "admin", "vc": "dev", "state": "WAITING", "keyword": "mn"}, id="filters"),
    ],
)
def test_jobs_filters_become_query_parameters(
    run: Run, logged_in: FakeMaster, args: list[str], expected: dict[str, str]
) -> None:
    logged_in.reply("GET", JOBS, {"totalCount": 0, "data": []})
    assert run("jobs", *args).exit_code == 0
    query = logged_in.only("GET", JOBS).query
    assert {k: v for k, v in query.items() if k not in ("limit", "order", "withTotalCount")} == expected


def test_jobs_all_and_user_is_a_usage_error(run: Run, logged_in: FakeMaster) -> None:
    result = run("jobs", "--all", "--user", "bob")
    assert result.exit_code == 2
    assert "--all and --user exclude each other" in result.stderr
    assert logged_in.requests == []


def test_jobs_json_prints_the_raw_list(run: Run, logged_in: FakeMaster) -> None:
    raw = [job_summary("mnist")]
    logged_in.reply("GET", JOBS, raw)
    result = run("jobs", "-o", "json")
    assert json.loads(result.stdout) == raw
    assert "withTotalCount" not in logged_in.only("GET", JOBS).query


WAITING_DETAIL = job_detail(
    state="WAITING",
    roles={
        "ps": [task_status(0, taskState="WAITING", containerIp=None, containerNodeName=None, containerPorts={})],
        "worker": [
            task_status(0, taskState="FAILED", containerExitCode=137, retries=2,
                        containerPorts={"http": "20001", "ssh": "20002", "nccl": "20003,20004"}),
        ],
    },
    events=[{"time": T0, "kind": "SUBMITTED", "message": "submitted by admin", "details": {}}],
    retries=1,
    appExitCode=137,
    appExitSpec={"code": 137, "type": "platform", "retry": "transient", "reason": "preempted"},
    waitingReason={"code": "VC_AT_MAX", "message": "VC default at max: 8/8 GPU", "position": 2, "figures": {}},
)


def test_job_show_renders_status_waiting_reason_tasks_and_events(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("GET", MNIST, WAITING_DETAIL)
    result = run("job", "show", "mnist")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:10] == [
        "Job: admin~mnist",
        "State: WAITING",
        "VC: default",
        "Priority: test",
        "Retries: 1",
        "Submitted: 2023-11-14 22:13:20",
        "Completed: -",
        "Exit: 137 (platform, transient: preempted)",
        "Waiting: VC default at max: 8/8 GPU (position 2 in VC default)",
        "",
    ]
    assert lines[10:13] == [
        "ROLE    INDEX  STATE    NODE   IP        PORTS                                  EXIT  RETRIES",
        "ps      0      WAITING  -      -         -                                      -     0",
        "worker  0      FAILED   node1  10.0.0.1  http:20001 ssh:20002 nccl:20003,20004  137   2",
    ]
    assert lines[14:] == ["Events:", "TIME                 KIND       MESSAGE",
                          "2023-11-14 22:13:20  SUBMITTED  submitted by admin"]


def test_job_show_prints_where_each_port_of_a_running_task_opens_through_the_master(
        run: Run, logged_in: FakeMaster) -> None:
    ports = {"http": "20001", "ssh": "20002", "tensorboard": "20003", "none": ""}
    logged_in.reply("GET", MNIST, job_detail(roles={
        "main": [task_status(0, containerPorts=ports), task_status(1, taskState="SUCCEEDED", containerPorts=ports)],
    }))
    lines = run("job", "show", "mnist").stdout.splitlines()
    head = lines.index("Ports through the master (a browser opens them from the job's page on the dashboard):")
    url = f"{logged_in.url}/proxy/admin~mnist/main/0"
    assert [line.split() for line in lines[head + 1:head + 4]] == [
        ["TASK", "PORT", "URL"], ["main[0]", "http", f"{url}/http/"], ["main[0]", "tensorboard", f"{url}/tensorboard/"],
    ]  # ssh is no web page, a label without a port opens nothing, an ended task's ports are gone
    assert not any("/proxy/" in line for line in lines[head + 4:])


def test_job_show_without_a_running_task_names_no_proxy_url(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("GET", MNIST, WAITING_DETAIL)
    assert "/proxy/" not in run("job", "show", "mnist").stdout


def test_job_show_accepts_a_full_key_and_quotes_it(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("GET", "/api/v2/jobs/bob~a b", job_detail("a b", username="bob"))
    result = run("job", "show", "bob~a b")
    assert result.exit_code == 0, result.output
    assert logged_in.requests[0].raw_path == "/api/v2/jobs/bob~a%20b"
    assert result.stdout.startswith("Job: bob~a b\n")


def test_job_show_json_is_the_raw_detail(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("GET", MNIST, WAITING_DETAIL)
    assert json.loads(run("job", "show", "admin~mnist", "--output", "json").stdout) == WAITING_DETAIL


def test_missing_job_is_one_line_on_stderr(run: Run, logged_in: FakeMaster) -> None:
    logged_in.error("GET", "/api/v2/jobs/admin~x", 404, "NoJobError", "job admin~x is not found")
    result = run("job", "show", "x")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == "error: NoJobError: job admin~x is not found\n"


def test_job_config_prints_the_submitted_text(run: Run, logged_in: FakeMaster) -> None:
    config = "protocolVersion: 2\nname: mnist\nsecrets: '******'\n"
    logged_in.reply("GET", MNIST + "/config", text=config, content_type="text/yaml")
    assert run("job", "config", "mnist").stdout == config
    assert json.loads(run("job", "config", "mnist", "-o", "json").stdout) == {
        "protocolVersion": 2, "name": "mnist", "secrets": "******",
    }


def test_logs_default_to_stdout_of_index_0_of_the_first_role(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("GET", MNIST, WAITING_DETAIL)
    logged_in.reply("GET", MNIST + "/tasks/ps/0/logs/stdout", text="line 1\nline 2\n")
    result = run("logs", "mnist")
    assert (result.exit_code, result.stdout) == (0, "line 1\nline 2\n")
    assert logged_in.only("GET", MNIST + "/tasks/ps/0/logs/stdout").query == {}


def test_logs_of_a_chosen_task_stream_and_tail(run: Run, logged_in: FakeMaster) -> None:
    path = MNIST + "/tasks/worker/1/logs/stderr"
    logged_in.reply("GET", path, text="boom")
    result = run("logs", "mnist", "--role", "worker", "--index", "1", "--stderr", "--tail", "100")
    assert result.stdout == "boom"
    assert logged_in.only("GET", path).query == {"tail": "100"}
    assert [r.path for r in logged_in.requests] == [path]


def test_stop_puts_execution_type_stop(run: Run, logged_in: FakeMaster) -> None:
    path = MNIST + "/executionType"
    logged_in.reply("PUT", path, {"message": "execute job admin~mnist successfully"}, status=202)
    result = run("stop", "mnist")
    assert (result.exit_code, result.stdout) == (0, "execute job admin~mnist successfully\n")
    sent = logged_in.only("PUT", path)
    assert (sent.json(), sent.headers["Content-Type"]) == ({"value": "STOP"}, "application/json")


def test_stopping_a_finished_job_reports_the_conflict(run: Run, logged_in: FakeMaster) -> None:
    logged_in.error("PUT", MNIST + "/executionType", 409, "ConflictJobError", "job admin~mnist has finished")
    result = run("stop", "mnist")
    assert (result.exit_code, result.stderr) == (1, "error: ConflictJobError: job admin~mnist has finished\n")


def test_bare_job_name_without_a_known_user_is_an_error(run: Run, master: FakeMaster) -> None:
    result = run("job", "show", "mnist", "--master", master.url)
    assert result.exit_code == 1
    assert "give it as user~job" in result.stderr
    assert master.requests == []


def test_a_finished_job_shows_no_stale_waiting_reason(run: Run, logged_in: FakeMaster) -> None:
    stale = {"code": "NO_NODE", "message": "no schedulable node", "position": 1, "figures": {}}
    logged_in.reply("GET", MNIST, job_detail(state="STOPPED", waitingReason=stale))
    result = run("job", "show", "mnist")
    assert "State: STOPPED" in result.stdout
    assert "Waiting" not in result.stdout
