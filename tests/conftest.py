"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.dockerkit import docker_engine, require_engine
from tests.filemodes import umask
from tests.registrykit import Registry, registry, require_registry


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    """The base URL of a real Docker Engine started for this test session, with the test image imported."""
    require_engine()
    with docker_engine() as url:
        yield url


@pytest.fixture(scope="session")
def docker_registry() -> Iterator[Registry]:
    """A real registry with htpasswd auth (tests/registrykit.py)."""
    require_registry()
    with registry() as r:
        yield r


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The common umask, under which files the platform keeps private must still come out 0600."""
    with umask(0o022):
        yield
