"""ParsedJob.config is the submitted document; masked_config hides every secret value."""

from __future__ import annotations

import copy

from pai.jobspec import MASK, masked_config

from .builders import parse_v1, parse_v2, v1_job, v2_job, v2_role


def test_every_secret_value_is_masked() -> None:
    secrets = {"token": "t0k", "registry": {"user": "u", "password": "p"}, "n": 7}
    job = v2_job({"worker": v2_role(commands=["login <% $secrets.token %>"])}, secrets=secrets)
    parsed = parse_v2(job)
    masked = masked_config(parsed)
    assert masked["secrets"] == {"token": MASK, "registry": MASK, "n": MASK}
    assert masked["taskRoles"] == job["taskRoles"]  # templates are kept, never rendered
    assert "t0k" not in repr(masked)


def test_masking_leaves_the_parsed_job_alone() -> None:
    job = v2_job(secrets={"token": "t0k"})
    parsed = parse_v2(job)
    masked_config(parsed)["taskRoles"]["worker"]["instances"] = 99
    assert parsed.config == job
    assert parsed.config["secrets"] == {"token": "t0k"}


def test_config_is_the_document_as_submitted() -> None:
    job = v2_job(parameters={"n": 2}, extras={"submitFrom": "cli"})
    job["taskRoles"]["worker"]["commands"] = ["run <% $parameters.n %>"]
    submitted = copy.deepcopy(job)
    parsed = parse_v2(job)
    assert parsed.config == submitted
    assert parsed.spec.task_roles[0].command == "run 2"


def test_v1_config_without_secrets_is_unchanged() -> None:
    parsed = parse_v1(v1_job(jobEnvs={"A": 1}))
    assert masked_config(parsed) == parsed.config == v1_job(jobEnvs={"A": 1})
