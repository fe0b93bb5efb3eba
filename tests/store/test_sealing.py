"""Job secrets at rest: masked in the row, sealed in ``jobs.sealed``, opened only for a task's start."""

from __future__ import annotations

import json

import pytest
import yaml

from pai.domain.jobspec import SECRET_MASK, RegistryAuth
from pai.store import jobs, sealing
from pai.store.codec import spec_to_dict
from pai.store.db import Database
from pai.store.keyring import Keyring, SecretKeyError

from .builders import job, role
from .secretjobs import PASSWORD, SECRET_VALUES, TOKEN, dump, secret_job


def test_no_secret_value_is_stored_in_clear(db: Database) -> None:
    value, body = secret_job()
    with db.session() as s:
        jobs.insert_job(s, value, body)
        jobs.save_job(s, value)  # a save of the job as submitted seals it too
    rows = dump(db)
    assert "tok-" in body and all(secret in body for secret in SECRET_VALUES)  # the test's own premise
    assert [secret for secret in SECRET_VALUES if secret in rows] == []
    assert "registry.example:5000/train" in rows and "whole_nodes" in rows  # the dump: whole rows, in clear


def test_the_job_reads_back_masked_and_opens_for_its_tasks(db: Database) -> None:
    value, body = secret_job()
    with db.session() as s:
        jobs.insert_job(s, value, body)
    with db.session() as s:
        stored = jobs.get_job(s, value.key)
        opened = sealing.unsealed(s, stored.spec)
        config = yaml.safe_load(jobs.get_config_text(s, value.key))
    assert stored.spec.secrets == {"token": SECRET_MASK, "pw": SECRET_MASK}
    assert stored.spec.task_roles[0].command == SECRET_MASK
    assert stored.spec.task_roles[0].image_auth == RegistryAuth(SECRET_MASK, SECRET_MASK, "registry.example:5000")
    assert opened == value.spec and opened.sealed is None
    assert opened.secrets == {"token": TOKEN, "pw": PASSWORD}
    assert opened.task_roles[0].command.startswith(f"echo {TOKEN}\n")
    assert config["secrets"] == {"token": SECRET_MASK, "pw": SECRET_MASK}
    assert config["taskRoles"]["worker"]["commands"][0] == "echo <% $secrets.token %>"


def test_a_job_saved_again_keeps_its_token(db: Database) -> None:
    value, body = secret_job()
    with db.session() as s:
        jobs.insert_job(s, value, body)
    with db.session() as s:
        stored = jobs.get_job(s, value.key)
        jobs.save_job(s, stored)
    with db.session() as s:
        again = jobs.get_job(s, value.key)
        assert again.spec == stored.spec and sealing.unsealed(s, again.spec) == value.spec


def test_a_job_without_secrets_is_stored_as_it_was(db: Database) -> None:
    plain = job("plain")
    with db.session() as s:
        jobs.insert_job(s, plain, "jobName: plain  # secrets: none here\n")
    with db.session() as s:
        assert jobs.get_job(s, plain.key) == plain
        assert jobs.get_config_text(s, plain.key) == "jobName: plain  # secrets: none here\n"


def test_a_job_with_secrets_and_no_key_is_refused_and_nothing_stored(db: Database) -> None:
    keyless = Database(db.url.render_as_string(hide_password=False))
    value, body = secret_job()
    try:
        with pytest.raises(SecretKeyError, match="no secret key is configured"), keyless.session() as s:
            jobs.insert_job(s, value, body)
        with keyless.session() as s:
            jobs.insert_job(s, job("plain"), "{}")  # a job without secrets needs none
    finally:
        keyless.dispose()
    assert "alice~secret" not in dump(db) and TOKEN not in dump(db)


def test_a_sealed_job_cannot_be_opened_with_another_key(db: Database) -> None:
    value, body = secret_job()
    with db.session() as s:
        jobs.insert_job(s, value, body)
    other = Database(db.url.render_as_string(hide_password=False), Keyring.generate("another key"))
    try:
        with other.session() as s:
            stored = jobs.get_job(s, value.key)  # reading, listing, scheduling need no key
            with pytest.raises(SecretKeyError, match="another key does not open"):
                sealing.unsealed(s, stored.spec)
    finally:
        other.dispose()


MASKED_TEXTS = {
    "yaml": ("name: a\nsecrets:\n  k: v1\n  n: {x: 2}\n", {"name": "a", "secrets": {"k": "******", "n": "******"}}),
    "json": ('{"protocolVersion": 2, "secrets": {"k": "v1"}}', {"protocolVersion": 2, "secrets": {"k": "******"}}),
    "empty secrets": ("name: a\nsecrets: {}\n", {"name": "a", "secrets": {}}),
}


@pytest.mark.parametrize(("text", "expected"), list(MASKED_TEXTS.values()), ids=list(MASKED_TEXTS))
def test_masked_text_keeps_the_syntax_and_masks_every_value(text: str, expected: dict[str, object]) -> None:
    masked = sealing.masked_text(text)
    loaded = json.loads(masked) if text.startswith("{") else yaml.safe_load(masked)
    assert loaded == expected and "v1" not in masked


UNCHANGED_TEXTS = {
    "no secrets": '{"jobName": "a"}',
    "the word only": "name: a  # no secrets\n",
    "secrets not a mapping": "secrets: [a]\n",
    "not a document": "config of x: [",
}


@pytest.mark.parametrize("text", list(UNCHANGED_TEXTS.values()), ids=list(UNCHANGED_TEXTS))
def test_masked_text_leaves_a_text_without_secrets_alone(text: str) -> None:
    assert sealing.masked_text(text) == text


def test_masking_a_masked_spec_changes_nothing() -> None:
    masked = sealing.masked_spec(spec_to_dict(secret_job()[0].spec))
    assert sealing.masked_spec(masked) == masked


def test_a_jobs_ssh_private_key_is_sealed_and_its_commands_stay_clear(db: Database) -> None:
    """The ssh plugin's key pair (pai.launcher.sshaccess): the private key only in the token; a job with nothing else
    to seal keeps its commands and its public key in clear."""
    private = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA-private-9f8e7d\n"
    value = job("ssh", roles=(role("worker", 1, command="python train.py"),), ssh_public_key="ssh-ed25519 AAAA job",
                ssh_private_key=private)
    with db.session() as s:
        jobs.insert_job(s, value, "{}")
    assert "private-9f8e7d" not in dump(db)
    with db.session() as s:
        stored = jobs.get_job(s, value.key)
        jobs.save_job(s, stored)
    with db.session() as s:
        stored = jobs.get_job(s, value.key)
        opened = sealing.unsealed(s, stored.spec)
    assert stored.spec.ssh_private_key == "" and stored.spec.sealed is not None
    assert stored.spec.task_roles[0].command == "python train.py"
    assert stored.spec.ssh_public_key == "ssh-ed25519 AAAA job"
    assert opened == value.spec
    assert "private-9f8e7d" not in dump(db)


def test_a_trials_token_is_sealed_and_reaches_only_the_start_of_a_task(db: Database) -> None:
    """A trial's job (pai.launcher.experiments): its token is in the sealed token only, in clear once unsealed."""
    value = job("lr-trial-0", roles=(role("train", 1, command="python train.py"),),
                trial_token="trial-token-5e4d3c2b1a")
    with db.session() as s:
        jobs.insert_job(s, value, "{}")
    assert "5e4d3c2b1a" not in dump(db)
    with db.session() as s:
        stored = jobs.get_job(s, value.key)
        opened = sealing.unsealed(s, stored.spec)
    assert stored.spec.trial_token == "" and stored.spec.sealed is not None
    assert stored.spec.task_roles[0].command == "python train.py"
    assert opened.trial_token == "trial-token-5e4d3c2b1a" and opened == value.spec
