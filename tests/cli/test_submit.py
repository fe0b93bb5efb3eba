"""pai submit: request shapes, stdin, --wait exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from .builders import job_detail
from .conftest import Run
from .fake_master import FakeMaster

JOBS = "/api/v2/jobs"
MNIST = "/api/v2/jobs/admin~mnist"
ACCEPTED = {"message": "update job mnist successfully", "jobName": "admin~mnist"}
V2 = "protocolVersion: 2\nname: mnist\ntype: job\ntaskRoles:\n  worker:\n    instances: 1\n"
V1 = '{"jobName": "mnist", "image": "busybox", "taskRoles": []}'


def test_submit_yaml_file_posts_it_verbatim_as_text_yaml(run: Run, logged_in: FakeMaster, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(V2)
    logged_in.reply("POST", JOBS, ACCEPTED, status=202)
    result = run("submit", str(spec))
    assert (result.exit_code, result.stdout) == (0, "admin~mnist\n")
    sent = logged_in.only("POST", JOBS)
    assert (sent.headers["Content-Type"], sent.body.decode()) == ("text/yaml", V2)
    assert sent.headers["Authorization"] == "Bearer tok-admin"


def test_submit_json_from_stdin_posts_application_json(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("POST", JOBS, ACCEPTED, status=202)
    result = run("submit", "-", input=V1)
    assert (result.exit_code, result.stdout) == (0, "admin~mnist\n")
    sent = logged_in.only("POST", JOBS)
    assert (sent.headers["Content-Type"], sent.body.decode()) == ("application/json", V1)


def test_warnings_of_the_answer_go_to_stderr(run: Run, logged_in: FakeMaster) -> None:
    warning = {"field": "authFile", "message": "not used"}
    logged_in.reply("POST", JOBS, {**ACCEPTED, "warnings": [warning]}, status=202)
    result = run("submit", "-", input=V2)
    assert (result.exit_code, result.stdout) == (0, "admin~mnist\n")
    assert result.stderr == "warning: authFile: not used\n"


def test_openpai_default_fs_code_dir_is_sent_as_written(run: Run, logged_in: FakeMaster, tmp_path: Path) -> None:
    """v0.14's examples name ``$PAI_DEFAULT_FS_URI/$PAI_USERNAME/...``: the master replaces it, not the CLI."""
    spec = tmp_path / "job.json"
    text = ('{"jobName": "mnist", "image": "busybox", "codeDir": "$PAI_DEFAULT_FS_URI/$PAI_USERNAME/code",'
            ' "taskRoles": []}')
    spec.write_text(text)
    logged_in.reply("POST", JOBS, ACCEPTED, status=202)
    assert run("submit", str(spec)).exit_code == 0
    assert logged_in.only("POST", JOBS).body.decode() == text


def test_invalid_spec_reported_by_the_master(run: Run, logged_in: FakeMaster) -> None:
    logged_in.error("POST", JOBS, 400, "InvalidProtocolError", "taskRoles.worker.instances: must be >= 1")
    result = run("submit", "-", input=V2)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == "error: InvalidProtocolError: taskRoles.worker.instances: must be >= 1\n"


def test_the_line_the_master_names_is_reported(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("POST", JOBS, {"code": "InvalidProtocolError", "line": 8,
                                   "message": "taskRoles.worker.instances: must be >= 1"}, status=400)
    result = run("submit", "-", input=V2)
    assert result.exit_code == 1
    assert result.stderr == ("error: InvalidProtocolError: taskRoles.worker.instances: must be >= 1 (line 8 of the"
                             " document)\n")


def test_unparsable_spec_is_refused_before_sending(run: Run, logged_in: FakeMaster, tmp_path: Path) -> None:
    spec = tmp_path / "job.json"
    spec.write_text('{"jobName": ')
    result = run("submit", str(spec))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot read job spec {spec}: invalid JSON")
    assert logged_in.requests == []


def test_missing_spec_file_is_a_usage_error(run: Run, logged_in: FakeMaster, tmp_path: Path) -> None:
    result = run("submit", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "nope.yaml" in result.stderr


@pytest.mark.parametrize(
    ("states", "exit_code", "final"),
    [
        pytest.param(["WAITING", "RUNNING", "SUCCEEDED"], 0, "admin~mnist SUCCEEDED", id="succeeded"),
        pytest.param(["RUNNING", "FAILED"], 1, "admin~mnist FAILED (exit code 1 (user, permanent: exited 1))",
                     id="failed"),
        pytest.param(["RUNNING", "STOPPED"], 1, "admin~mnist STOPPED", id="stopped"),
    ],
)
def test_submit_wait_exits_0_only_when_the_job_succeeded(
    run: Run, logged_in: FakeMaster, states: list[str], exit_code: int, final: str
) -> None:
    logged_in.reply("POST", JOBS, ACCEPTED, status=202)
    for state in states:
        failed = state == "FAILED"
        logged_in.reply("GET", MNIST, job_detail(
            state=state,
            appExitCode=1 if failed else None,
            appExitSpec={"code": 1, "type": "user", "retry": "permanent", "reason": "exited 1"} if failed else None,
        ))
    result = run("submit", "--wait", "--interval", "0.01", "-", input=V2)
    assert result.exit_code == exit_code, result.output
    assert result.stdout.splitlines() == ["admin~mnist", final]
    assert result.stderr.splitlines() == [f"admin~mnist: {s}" for s in states]
    assert len([r for r in logged_in.requests if r.path == MNIST]) == len(states)


def test_submit_wait_reports_the_waiting_reason(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("POST", JOBS, ACCEPTED, status=202)
    reason = {"code": "VC_AT_MAX", "message": "VC default at max: 8/8 GPU", "position": 1, "figures": {}}
    logged_in.reply("GET", MNIST, job_detail(state="WAITING", waitingReason=reason))
    logged_in.reply("GET", MNIST, job_detail(state="SUCCEEDED"))
    result = run("submit", "--wait", "--interval", "0.01", "-", input=V2)
    assert result.stderr.splitlines()[0] == (
        "admin~mnist: WAITING (waiting: VC default at max: 8/8 GPU (position 1 in VC default))"
    )


def test_submit_wait_timeout(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("POST", JOBS, ACCEPTED, status=202)
    logged_in.reply("GET", MNIST, job_detail(state="RUNNING"))
    result = run("submit", "--wait", "--timeout", "0.05", "--interval", "0.01", "-", input=V2)
    assert result.exit_code == 124  # as timeout(1): not the job's failure (1)
    assert result.stdout == "admin~mnist\n"
    assert result.stderr.splitlines()[-1] == "error: job admin~mnist is still RUNNING after 0.05s"
