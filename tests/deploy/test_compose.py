"""deploy/compose.yaml, the trial cluster: PostgreSQL, two masters on it (a leader and a standby), two agents given
both, Prometheus. Every service is wired to the others (URLs, credentials, health), every variable and flag it
gives pai is one pai reads, and the images and paths are the Dockerfile's. (Docker Compose itself is not installed
here; this reads the file as Compose would.)"""

from __future__ import annotations

import ipaddress
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import make_url

from pai.rest_server.routes import routes
from pai.store import keyring
from tests.deploy import settings
from tests.deploy.dockerfile import Dockerfile, parse
from tests.deploy.settings import ROOT, check_pai_command

COMPOSE = ROOT / "deploy" / "compose.yaml"
SECRETS = {"PAI_DB_PASSWORD": "db0secret1", "PAI_ADMIN_PASSWORD": "admin-secret", "PAI_AGENT_TOKEN": "agent-token",
           "PAI_SECRET_KEY": "mobpMx-r08hNUdNXs676IVrAM-D6G1JSaVSqaGXVtro="}
MASTERS = ("master-a", "master-b")
AGENTS = ("agent-1", "agent-2")
SHARED = ("PAI_DATABASE_URL", "PAI_SECRET_KEY", "PAI_AGENT_TOKEN")  # what every master of one database must share
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


def _volumes(service: dict[str, Any], *, binds: bool = False) -> dict[str, str]:
    """Mount target -> named volume (with ``binds``: -> the host path of a bind mount, relative to this file)."""
    mounts = {spec.split(":")[1]: spec.split(":")[0] for spec in service.get("volumes", [])}
    return {target: source for target, source in mounts.items() if source.startswith((".", "/")) == binds}


def _argv(service: dict[str, Any], dockerfile: Dockerfile) -> list[str]:
    target = service["build"]["target"]
    command = service.get("command", [])
    return [*dockerfile.stages[target].one("ENTRYPOINT").exec_form(),
            *(shlex.split(command) if isinstance(command, str) else command)]




def _master(compose: dict[str, Any], dockerfile: Dockerfile, name: str) -> dict[str, Any]:
    """The parameters ``pai master`` gets in service ``name``."""
    service = compose["services"][name]
    return check_pai_command(_argv(service, dockerfile), _env(service))


def test_the_cluster_is_postgresql_two_masters_two_agents_and_prometheus(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"postgres", *MASTERS, *AGENTS, "prometheus"}


def test_it_refuses_to_start_without_its_secrets() -> None:
    for name in SECRETS:
        with pytest.raises(KeyError, match=name):
            load({k: v for k, v in SECRETS.items() if k != name})


def test_the_headers_commands_make_secrets_pai_and_postgresql_take(tmp_path: Path) -> None:
    """The ``export`` lines at the top of the file, run as written: the secret key is a key the master takes, the
    database password has only letters and digits (it goes into a URL unquoted)."""
    exports = re.findall(r"(?m)^#   (export (\w+)=\$\(.*\))$", COMPOSE.read_text())
    assert sorted(name for _, name in exports) == sorted(set(SECRETS) - {"PAI_ADMIN_PASSWORD"})
    script = "\n".join(line for line, _ in exports) + "\nenv"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=True)
    made = dict(line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("PAI_"))
    key = keyring.load(tmp_path, create=False, env={keyring.KEY_ENV: made["PAI_SECRET_KEY"]})
    assert key.keys == (made["PAI_SECRET_KEY"],)
    assert re.fullmatch(r"[0-9a-f]{32}", made["PAI_DB_PASSWORD"]) and len(made["PAI_AGENT_TOKEN"]) >= 32
    load(made | {"PAI_ADMIN_PASSWORD": "x"})  # everything the file asks for


def test_postgresql_is_a_pinned_public_image_with_its_data_in_a_volume(compose: dict[str, Any]) -> None:
    pg = compose["services"]["postgres"]
    name, _, tag = pg["image"].partition(":")
    assert name == "postgres" and tag and tag != "latest"
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])
    assert _volumes(pg)["/var/lib/postgresql/data"] in compose["volumes"]


@pytest.mark.parametrize("name", MASTERS)
def test_each_master_uses_that_database(compose: dict[str, Any], name: str) -> None:
    pg, master = compose["services"]["postgres"], compose["services"][name]
    url = make_url(_env(master)["PAI_DATABASE_URL"])
    pg_env = _env(pg)
    assert (url.host, url.port, url.database, url.username, url.password) == (
        "postgres", 5432, pg_env["POSTGRES_DB"], pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"])
    assert master["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_the_masters_share_the_database_the_secret_key_and_the_agent_token(compose: dict[str, Any]) -> None:
    envs = [_env(compose["services"][name]) for name in MASTERS]
    shared = [{k: env[k] for k in SHARED} for env in envs]
    assert shared[0] == shared[1]
    assert (shared[0]["PAI_SECRET_KEY"], shared[0]["PAI_AGENT_TOKEN"]) == (
        SECRETS["PAI_SECRET_KEY"], SECRETS["PAI_AGENT_TOKEN"])
    assert all(_env(compose["services"][a])["PAI_AGENT_TOKEN"] == SECRETS["PAI_AGENT_TOKEN"] for a in AGENTS)


@pytest.mark.parametrize("service", [*MASTERS, *AGENTS])
def test_pai_services_are_built_from_the_dockerfile_targets(compose: dict[str, Any], dockerfile: Dockerfile,
                                                             service: str) -> None:
    build = compose["services"][service]["build"]
    context = (COMPOSE.parent / build["context"]).resolve()
    assert context == ROOT and (context / build["dockerfile"]).resolve() == dockerfile.path
    assert build["target"] == ("master" if service in MASTERS else "agent")


@pytest.mark.parametrize("service", [*MASTERS, *AGENTS])
def test_every_variable_given_to_pai_is_one_it_reads(compose: dict[str, Any], service: str) -> None:
    process = "master" if service in MASTERS else "agent"
    given = set(_env(compose["services"][service]))
    assert given - settings.env_read_by()[process] == set()


@pytest.mark.parametrize("name", MASTERS)
def test_each_master_is_pai_master_with_workers_advertising_its_own_url(
        compose: dict[str, Any], dockerfile: Dockerfile, name: str) -> None:
    master = compose["services"][name]
    params = _master(compose, dockerfile, name)
    assert [p.split(":")[-1] for p in master["ports"]] == [str(params["port"])]
    assert params["advertise_url"] == f"http://{name}:{params['port']}"  # the service name: its address here
    assert params["workers"] >= 2 and params["launcher_port"] not in (None, params["port"])
    image_env = dict(shlex.split(i.args)[0].split("=", 1) for i in dockerfile.stages["master"].all("ENV"))
    assert _volumes(master)[image_env["PAI_DATA_DIR"]] in compose["volumes"]
    assert master["init"] is True


def test_the_masters_have_a_data_directory_and_a_published_port_each(compose: dict[str, Any]) -> None:
    masters = [compose["services"][name] for name in MASTERS]
    assert len({m["volumes"][0].split(":")[0] for m in masters}) == len(MASTERS)
    assert len({p.split(":")[0] for m in masters for p in m["ports"]}) == len(MASTERS)


@pytest.mark.parametrize("service", AGENTS)
def test_each_agent_is_pai_agent_at_its_own_address_following_both_masters_launchers(
        compose: dict[str, Any], dockerfile: Dockerfile, service: str) -> None:
    agent = compose["services"][service]
    env = _env(agent)
    params = check_pai_command(_argv(agent, dockerfile), env)
    launchers = [f"http://{m}:{_master(compose, dockerfile, m)['launcher_port']}" for m in MASTERS]
    assert params["master_url"] == ",".join(launchers)
    assert params["name"] == service
    address = agent["networks"]["default"]["ipv4_address"]
    subnet = compose["networks"]["default"]["ipam"]["config"][0]["subnet"]
    assert params["address"] == address and ipaddress.ip_address(address) in ipaddress.ip_network(subnet)
    # The trial needs nothing from the host: tasks are processes of the agent's container, and go with it.
    assert params["runtime"] == "process" and params["kill_on_exit"]
    assert _volumes(agent)[str(params["work_dir"])] in compose["volumes"]
    assert {m: agent["depends_on"][m]["condition"] for m in MASTERS} == dict.fromkeys(MASTERS, "service_healthy")
    assert dockerfile.stages["master"].all("HEALTHCHECK")  # what makes a master healthy
    assert agent["init"] is True  # PID 1 reaps the tasks' orphans


def test_prometheus_scrapes_both_masters_api_and_launcher_and_finds_the_agents_through_both(
        compose: dict[str, Any], dockerfile: Dockerfile) -> None:
    prom = compose["services"]["prometheus"]
    name, _, tag = prom["image"].partition(":")
    assert name == "prom/prometheus" and re.fullmatch(r"v2\.\d+\.\d+", tag)
    flags = dict(a.removeprefix("--").split("=", 1) for a in prom["command"])
    config_dir, config_name = flags["config.file"].rsplit("/", 1)
    host_dir = (COMPOSE.parent / _volumes(prom, binds=True)[config_dir]).resolve()
    assert host_dir == ROOT / "deploy" / "prometheus" and prom["volumes"][0].endswith(":ro")
    config = yaml.safe_load((host_dir / config_name).read_text())
    assert all((host_dir / f).is_file() for f in config["rule_files"])
    assert _volumes(prom)[flags["storage.tsdb.path"]] in compose["volumes"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    masters = {m: _master(compose, dockerfile, m) for m in MASTERS}
    assert jobs["pai-master"]["static_configs"] == [{"targets": [f"{m}:{p['port']}" for m, p in masters.items()]}]
    assert jobs["pai-launcher"]["static_configs"] == [
        {"targets": [f"{m}:{p['launcher_port']}" for m, p in masters.items()]}]
    sd = [c["url"] for c in jobs["pai-agent"]["http_sd_configs"]]
    assert sd == [f"http://{m}:{p['port']}/metrics/agents" for m, p in masters.items()]
    assert "/metrics/agents" in {r.path for r in routes if r.method == "GET"}


def test_every_volume_is_declared_and_used(compose: dict[str, Any]) -> None:
    used = {v for s in compose["services"].values() for v in _volumes(s).values()}
    assert used == set(compose["volumes"])
