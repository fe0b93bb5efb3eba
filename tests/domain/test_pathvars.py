"""OpenPAI v0.14's variables in a v1 job's paths, replaced as its REST server replaced them."""

from __future__ import annotations

import pytest

from pai.domain.pathvars import expand

CASES = [
    # (name, path, expanded with job "mnist", user "alice", default fs "hdfs://nn:9000/")
    ("default fs, user", "$PAI_DEFAULT_FS_URI/$PAI_USERNAME/code", "hdfs://nn:9000/alice/code"),
    ("both spellings of the user", "/$PAI_USER_NAME/$PAI_USERNAME", "/alice/alice"),
    ("every job name", "/$PAI_JOB_NAME/out/$PAI_JOB_NAME", "/mnist/out/mnist"),
    ("only the first default fs (String.replace)", "$PAI_DEFAULT_FS_URI/$PAI_DEFAULT_FS_URI",
     "hdfs://nn:9000/$PAI_DEFAULT_FS_URI"),
    ("a longer name is another variable", "/$PAI_USERNAMES/$PAI_JOB_NAME_2/$PAI_USER_NAME1",
     "/$PAI_USERNAMES/$PAI_JOB_NAME_2/$PAI_USER_NAME1"),
    ("other variables are left", "/data/$HOME/$PAI_CONTAINER_ID", "/data/$HOME/$PAI_CONTAINER_ID"),
]


@pytest.mark.parametrize(("name", "path", "expanded"), CASES, ids=[c[0] for c in CASES])
def test_expand(name: str, path: str, expanded: str) -> None:
    assert expand(path, job_name="mnist", user="alice", default_fs="hdfs://nn:9000/") == expanded


def test_a_replacement_is_taken_literally() -> None:
    assert expand("/$PAI_USER_NAME", user=r"a\1b$&") == r"/a\1b$&"


def test_variables_not_given_are_left() -> None:
    assert expand("$PAI_DEFAULT_FS_URI/$PAI_USERNAME/$PAI_JOB_NAME", job_name="j") == (
        "$PAI_DEFAULT_FS_URI/$PAI_USERNAME/j")
