"""The node's health problems in words: disk space of the work directory, the container engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.nodeagent.health import HealthCheck


@pytest.mark.parametrize(("min_free", "engine", "expected"), [
    pytest.param(0, None, [], id="healthy"),
    pytest.param(10**9, None, ["MB, below 1000000000 MB"], id="disk-almost-full"),
    pytest.param(0, lambda: "connection refused",
                 ["engine down: the Docker Engine does not answer: connection refused"], id="engine-down"),
    pytest.param(0, lambda: None, [], id="engine-up"),
])
def test_problems(tmp_path: Path, min_free: int, engine: object, expected: list[str]) -> None:
    check = HealthCheck(tmp_path, min_free, engine)  # type: ignore[arg-type]
    problems = check.problems()
    assert len(problems) == len(expected)
    for found, words in zip(problems, expected, strict=True):
        assert words in found


def test_a_work_directory_that_is_gone_is_a_problem(tmp_path: Path) -> None:
    (problem,) = HealthCheck(tmp_path / "gone").problems()
    assert "cannot be read" in problem
