"""deploy/systemd: the units run real ``pai`` commands with the settings of the samples, in the directories
systemd makes for them, after the network (and PostgreSQL), as the pai user, restarted on failure."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import make_url

from pai.rest_server.config import MasterConfig
from tests.deploy.settings import PAI_SCRIPT, check_pai_command
from tests.deploy.systemd import (
    AGENT_ENV,
    AGENT_UNIT,
    MASTER_ENV,
    MASTER_UNIT,
    STATE,
    parse_env_file,
    parse_unit,
    service,
)

UNITS = {"master": MASTER_UNIT, "agent": AGENT_UNIT}
INSTANCE = {"master": None, "agent": "gpu-07"}
EXECUTABLE = "/usr/local/bin/pai"  # where scripts/setup.sh, run as root, links `pai`


def _etc(tmp: Path, master_env: str | None = None, agent_env: str | None = None) -> Path:
    """/etc/pai as an operator installs it: the samples copied (or other content)."""
    etc = tmp / "etc" / "pai"
    etc.mkdir(parents=True)
    (etc / "master.env").write_text(MASTER_ENV.read_text() if master_env is None else master_env)
    (etc / "agent.env").write_text(AGENT_ENV.read_text() if agent_env is None else agent_env)
    return etc


@pytest.mark.parametrize("process", ["master", "agent"])
def test_the_unit_starts_after_the_network_as_the_pai_user_and_restarts_on_failure(process: str) -> None:
    unit = parse_unit(UNITS[process])
    assert "network-online.target" in unit.words("Unit", "After")
    assert "network-online.target" in unit.words("Unit", "Wants")
    if process == "master":
        assert "postgresql.service" in unit.words("Unit", "After")
    else:  # --runtime auto looks for the engine once, at the start
        assert "docker.service" in unit.words("Unit", "After")
    assert unit.value("Service", "Restart") == "on-failure"
    assert unit.value("Service", "User") == unit.value("Service", "Group") == "pai"
    assert unit.value("Service", "Type") == "exec"  # a missing executable fails the start, visibly
    assert unit.words("Install", "WantedBy") == ["multi-user.target"]
    files = unit.values("Service", "EnvironmentFile")
    assert files[0] == f"/etc/pai/{process}.env"  # required: the unit does not start without its settings


def test_the_agent_is_stopped_alone_so_that_its_tasks_survive_a_restart() -> None:
    """The agent re-adopts its running tasks after a restart and its lease watchdog fences them if it does not come
    back; systemd's default KillMode would kill every task of the node at every restart instead."""
    assert parse_unit(AGENT_UNIT).value("Service", "KillMode") == "process"


@pytest.mark.parametrize("process", ["master", "agent"])
def test_exec_start_is_a_real_pai_command_with_the_sample_settings(process: str, tmp_path: Path) -> None:
    run = service(UNITS[process], _etc(tmp_path), Path(STATE), INSTANCE[process])
    assert run.argv[0] == EXECUTABLE
    check_pai_command(run.argv, run.env)


@pytest.mark.parametrize("process", ["master", "agent"])
def test_exec_start_is_complete_with_an_environment_file_that_sets_nothing(process: str, tmp_path: Path) -> None:
    """Every variable the command line uses has a default in the unit: a short /etc/pai file still works."""
    minimal = {"master": "", "agent": "PAI_MASTER_URL=http://master.example:9186\n"}
    etc = _etc(tmp_path, master_env=minimal["master"], agent_env=minimal["agent"])
    run = service(UNITS[process], etc, Path(STATE), INSTANCE[process])
    check_pai_command(run.argv, run.env)


def test_a_unit_naming_a_command_pai_does_not_have_is_caught(tmp_path: Path) -> None:
    broken = tmp_path / "pai-master.service"
    broken.write_text(MASTER_UNIT.read_text().replace("/pai master ", "/pai mastr "))
    run = service(broken, _etc(tmp_path), Path(STATE))
    with pytest.raises(AssertionError, match="mastr"):
        check_pai_command(run.argv, run.env)
    flag = tmp_path / "flag.service"
    flag.write_text(MASTER_UNIT.read_text().replace("--port ", "--prot "))
    run = service(flag, _etc(tmp_path / "2"), Path(STATE))
    with pytest.raises(AssertionError, match="--prot"):
        check_pai_command(run.argv, run.env)


def test_the_directories_are_the_state_directories_systemd_makes_for_the_pai_user(tmp_path: Path) -> None:
    master = service(MASTER_UNIT, _etc(tmp_path), Path(STATE))
    assert master.env["PAI_DATA_DIR"] == "/var/lib/pai/master"
    assert [str(d) for d in master.state_dirs] == [master.env["PAI_DATA_DIR"]]
    agent = service(AGENT_UNIT, _etc(tmp_path / "2"), Path(STATE), "gpu-07")
    work_dir = agent.argv[agent.argv.index("--work-dir") + 1]
    assert work_dir == "/var/lib/pai/agent/gpu-07"
    assert [str(d) for d in agent.state_dirs] == [work_dir]
    assert agent.argv[agent.argv.index("--name") + 1] == "gpu-07"


def test_the_ports_are_the_masters_and_the_agents_find_its_launcher(tmp_path: Path) -> None:
    master = service(MASTER_UNIT, _etc(tmp_path), Path(STATE))
    port = int(master.argv[master.argv.index("--port") + 1])
    assert port == MasterConfig().port == 9186
    assert "--launcher-port" not in master.argv  # its default
    assert make_url(parse_env_file(MASTER_ENV.read_text())["PAI_DATABASE_URL"]).get_backend_name() == "postgresql"
    launcher = MasterConfig(port=port, workers=2).launcher_port_number
    assert urlsplit(parse_env_file(AGENT_ENV.read_text())["PAI_MASTER_URL"]).port == launcher


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("process", ["master", "agent"])
def test_systemd_analyze_verify_finds_nothing_to_say(process: str, tmp_path: Path) -> None:
    """systemd's own reading: unknown keys, bad values, a bad ExecStart. The executable is pointed at the installed
    ``pai`` (verify checks that it exists); the agent is verified as an instance of its template."""
    name = UNITS[process].name.replace("@.", "@gpu-07.")
    (tmp_path / name).write_text(UNITS[process].read_text().replace(EXECUTABLE, str(PAI_SCRIPT)))
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / name)], capture_output=True,
                       text=True, timeout=60)
    assert (r.returncode, r.stdout + r.stderr) == (0, "")
