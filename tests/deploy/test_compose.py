"""deploy/compose.yaml, the trial cluster: PostgreSQL, the master on it, two agents. Every service is wired to the
others (URLs, credentials, health), every variable and flag it gives pai is one pai reads, and the images and
paths are the Dockerfile's. (Docker Compose itself is not installed here; this reads the file as Compose would.)"""

from __future__ import annotations

import ipaddress
import re
import shlex
from typing import Any

import pytest
import yaml
from sqlalchemy import make_url

from tests.deploy import settings
from tests.deploy.dockerfile import Dockerfile, parse
from tests.deploy.settings import ROOT, check_pai_command

COMPOSE = ROOT / "deploy" / "compose.yaml"
SECRETS = {"PAI_DB_PASSWORD": "db0secret1", "PAI_ADMIN_PASSWORD": "admin-secret", "PAI_AGENT_TOKEN": "agent-token"}
_VAR = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's interpolation: ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?error}``,
    ``${VAR?error}``, ``$VAR``, ``$$``."""

    def one(m: re.Match[str]) -> str:
        if m[0] == "$$":
            return "$"
        name, op, arg = (m[1], m[2], m[3]) if m[1] else (m[4], None, None)
        value = env.get(name)
        missing = value is None or (value == "" and op is not None and op.startswith(":"))
        if op is not None and op.endswith("?") and missing:
            raise KeyError(f"{name}: {arg}")
        if op is not None and op.endswith("-") and missing:
            return arg or ""
        return value or ""

    return _VAR.sub(one, value)


def load(env: dict[str, str]) -> dict[str, Any]:
    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return interpolate(node, env) if isinstance(node, str) else node

    doc = walk(yaml.safe_load(COMPOSE.read_text()))
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load(SECRETS)


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse(ROOT / "deploy" / "docker" / "Dockerfile")


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _volumes(service: dict[str, Any]) -> dict[str, str]:
    """Mount target -> named volume."""
    return {spec.split(":")[1]: spec.split(":")[0] for spec in service.get("volumes", [])}


def _argv(service: dict[str, Any], dockerfile: Dockerfile) -> list[str]:
    target = service["build"]["target"]
    command = service.get("command", [])
    return [*dockerfile.stages[target].one("ENTRYPOINT").exec_form(),
            *(shlex.split(command) if isinstance(command, str) else command)]


def test_the_cluster_is_postgresql_a_master_and_two_agents(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"postgres", "master", "agent-1", "agent-2"}


def test_it_refuses_to_start_without_its_secrets() -> None:
    for name in SECRETS:
        with pytest.raises(KeyError, match=name):
            load({k: v for k, v in SECRETS.items() if k != name})


def test_postgresql_is_a_pinned_public_image_with_its_data_in_a_volume(compose: dict[str, Any]) -> None:
    pg = compose["services"]["postgres"]
    name, _, tag = pg["image"].partition(":")
    assert name == "postgres" and tag and tag != "latest"
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])
    assert _volumes(pg)["/var/lib/postgresql/data"] in compose["volumes"]


def test_the_master_uses_that_database(compose: dict[str, Any]) -> None:
    pg, master = compose["services"]["postgres"], compose["services"]["master"]
    url = make_url(_env(master)["PAI_DATABASE_URL"])
    pg_env = _env(pg)
    assert (url.host, url.port, url.database, url.username, url.password) == (
        "postgres", 5432, pg_env["POSTGRES_DB"], pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"])
    assert master["depends_on"]["postgres"]["condition"] == "service_healthy"


@pytest.mark.parametrize("service", ["master", "agent-1", "agent-2"])
def test_pai_services_are_built_from_the_dockerfile_targets(compose: dict[str, Any], dockerfile: Dockerfile,
                                                             service: str) -> None:
    build = compose["services"][service]["build"]
    context = (COMPOSE.parent / build["context"]).resolve()
    assert context == ROOT and (context / build["dockerfile"]).resolve() == dockerfile.path
    assert build["target"] == ("master" if service == "master" else "agent")


@pytest.mark.parametrize("service", ["master", "agent-1", "agent-2"])
def test_every_variable_given_to_pai_is_one_it_reads(compose: dict[str, Any], service: str) -> None:
    process = "master" if service == "master" else "agent"
    given = set(_env(compose["services"][service]))
    assert given - settings.env_read_by()[process] == set()


def test_the_master_command_is_pai_master_on_the_published_port_with_its_data_in_a_volume(
        compose: dict[str, Any], dockerfile: Dockerfile) -> None:
    master = compose["services"]["master"]
    params = check_pai_command(_argv(master, dockerfile), _env(master))
    assert [p.split(":")[-1] for p in master["ports"]] == [str(params["port"])]
    image_env = dict(shlex.split(i.args)[0].split("=", 1) for i in dockerfile.stages["master"].all("ENV"))
    assert _volumes(master)[image_env["PAI_DATA_DIR"]] in compose["volumes"]


@pytest.mark.parametrize("service", ["agent-1", "agent-2"])
def test_each_agent_is_pai_agent_at_its_own_address_reaching_the_master_with_its_token(
        compose: dict[str, Any], dockerfile: Dockerfile, service: str) -> None:
    master, agent = compose["services"]["master"], compose["services"][service]
    env = _env(agent)
    params = check_pai_command(_argv(agent, dockerfile), env)
    master_port = check_pai_command(_argv(master, dockerfile), _env(master))["port"]
    assert params["master_url"] == f"http://master:{master_port}"
    assert env["PAI_AGENT_TOKEN"] == _env(master)["PAI_AGENT_TOKEN"]
    assert params["name"] == service
    address = agent["networks"]["default"]["ipv4_address"]
    subnet = compose["networks"]["default"]["ipam"]["config"][0]["subnet"]
    assert params["address"] == address and ipaddress.ip_address(address) in ipaddress.ip_network(subnet)
    # The trial needs nothing from the host: tasks are processes of the agent's container, and go with it.
    assert params["runtime"] == "process" and params["kill_on_exit"]
    assert _volumes(agent)[str(params["work_dir"])] in compose["volumes"]
    assert agent["depends_on"]["master"]["condition"] == "service_healthy"
    assert dockerfile.stages["master"].all("HEALTHCHECK")  # what makes the master healthy
    assert agent["init"] is True  # PID 1 reaps the tasks' orphans


def test_every_volume_is_declared_and_used(compose: dict[str, Any]) -> None:
    used = {v for s in compose["services"].values() for v in _volumes(s).values()}
    assert used == set(compose["volumes"])
