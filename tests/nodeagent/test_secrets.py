"""A job's secrets as files in the task, where OpenPAI puts them (``secrets.yaml``), with the process runtime."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from pai.nodeagent import jobsecrets
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.protocol import ContainerStatus, StartTask
from tests.nodeagent.builders import start_task, wait_status

SECRETS: dict[str, Any] = {"token": "s3cr3t-token", "port": 8080, "nested": {"a": [1, True]},
                           "../escape": "x", "secrets.yaml": "y"}
READ = 'cd "$PAI_SECRET_DIR" && stat -c "%a %n" . * | sort -k2 && cat token; echo; cat port nested'


async def test_the_task_reads_its_secrets_as_files(runtime: ProcessRuntime, tmp_path: Path) -> None:
    workdir = tmp_path / "a1"
    await runtime.start(start_task("a1", READ, secrets=SECRETS), workdir)
    report = await wait_status(runtime, "a1", ContainerStatus.EXITED)
    assert report.exit_code == 0, (workdir / "stderr.log").read_text()
    lines = (workdir / "stdout.log").read_text().splitlines()
    assert lines == [
        "700 .",
        "600 nested",
        "600 port",
        "600 secrets.yaml",  # OpenPAI's file: every secret, as YAML
        "600 token",  # one file per secret named like a plain file; "../escape" is only in secrets.yaml
        "s3cr3t-token",
        '8080{"a":[1,true]}',
    ]


async def test_secrets_yaml_holds_every_secret_and_goes_when_the_attempt_ends(
        runtime: ProcessRuntime, tmp_path: Path) -> None:
    workdir = tmp_path / "a1"
    await runtime.start(start_task("a1", 'cp "$PAI_SECRET_DIR/secrets.yaml" seen.yaml', secrets=SECRETS), workdir)
    await wait_status(runtime, "a1", ContainerStatus.EXITED)
    assert yaml.safe_load((workdir / "seen.yaml").read_text()) == SECRETS
    assert not jobsecrets.directory(workdir).exists()


@pytest.mark.parametrize("secrets", [None, {}], ids=["no secrets section", "empty secrets"])
async def test_a_job_without_secrets_has_no_secret_dir(
        runtime: ProcessRuntime, tmp_path: Path, secrets: dict[str, Any] | None) -> None:
    workdir = tmp_path / "a1"
    await runtime.start(start_task("a1", 'echo "${PAI_SECRET_DIR-unset}"; ls "$PAI_SECRET_DIR"', secrets=secrets),
                        workdir)
    await wait_status(runtime, "a1", ContainerStatus.EXITED)
    expected = "unset" if secrets is None else str(jobsecrets.directory(workdir))
    assert (workdir / "stdout.log").read_text().splitlines()[0] == expected


async def test_secrets_are_neither_logged_nor_shown(
        runtime: ProcessRuntime, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    cmd = start_task("a1", "true", secrets=SECRETS)
    await runtime.start(cmd, tmp_path / "a1")
    await wait_status(runtime, "a1", ContainerStatus.EXITED)
    assert "s3cr3t" not in caplog.text
    assert "s3cr3t" not in repr(cmd)
    assert "s3cr3t" not in "".join(p.read_text() for p in (tmp_path / "state").glob("*.json"))
    assert StartTask.from_dict(cmd.to_dict()).secrets == SECRETS
