"""deploy/master.env.example and deploy/agent.env.example document every setting the master and the agent have,
hold only settings something reads, and set the tuning flags at the code's own defaults: neither sample can fall
behind the code without this failing."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import settings
from tests.deploy.settings import COMMANDS, config_fields, envvars, long_flag, master_config, options, undocumented
from tests.deploy.systemd import (
    AGENT_ENV,
    AGENT_UNIT,
    MASTER_ENV,
    MASTER_UNIT,
    commented_settings,
    parse_env_file,
    parse_unit,
    variables_used,
)

POSTGRES = ["--database-url", "postgresql+psycopg://db.example/pai"]
SAMPLES = {"master": (MASTER_ENV, MASTER_UNIT), "agent": (AGENT_ENV, AGENT_UNIT)}
OPTS = {"master": "PAI_MASTER_OPTS", "agent": "PAI_AGENT_OPTS"}
SECRETS = ("PAI_ADMIN_PASSWORD", "PAI_AGENT_TOKEN", "PAI_SECRET_KEY")
REQUIRED = {"master": [], "agent": ["--master", "http://master.example:9186"]}


def _names(process: str) -> list[str]:
    """Every flag of the process's command, every variable its options read, every variable its code reads."""
    command = COMMANDS[process]
    names = [long_flag(o) for o in options(command)] + [v for o in options(command) for v in envvars(o)]
    return sorted(set(names) | settings.env_read_by()[process])


def _unit_variables(unit_path: Path) -> set[str]:
    return variables_used(parse_unit(unit_path).value("Service", "ExecStart"))


@pytest.mark.parametrize("process", ["master", "agent"])
def test_every_flag_and_variable_is_documented_in_a_comment(process: str) -> None:
    sample, _ = SAMPLES[process]
    assert undocumented(sample.read_text(), _names(process)) == []


def test_the_check_names_what_a_sample_leaves_out() -> None:
    text = MASTER_ENV.read_text()
    cut = "\n".join(line for line in text.splitlines() if "--node-timeout" not in line and "PAI_LOG_LEVEL" not in line)
    assert undocumented(cut, _names("master")) == ["--node-timeout", "PAI_LOG_LEVEL"]


@pytest.mark.parametrize("process", ["master", "agent"])
def test_the_sample_is_a_systemd_environment_file_and_every_value_is_documented_above_it(process: str) -> None:
    sample, _ = SAMPLES[process]
    parse_env_file(sample.read_text(), sample.name)  # strict: KEY=value, quoted spaces, no export, no $
    lines = sample.read_text().splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith("#"):
            assert i > 0 and lines[i - 1].startswith("#"), f"{sample.name}:{i + 1}: no comment above {line!r}"


@pytest.mark.parametrize("process", ["master", "agent"])
def test_every_variable_the_sample_sets_is_read_by_the_process_or_its_unit(process: str) -> None:
    sample, unit = SAMPLES[process]
    text = sample.read_text()
    known = settings.env_read_by()[process] | _unit_variables(unit)
    assigned = set(parse_env_file(text)) | set(commented_settings(text))
    assert assigned - known == set(), f"{sample.name} sets variables nothing reads"


@pytest.mark.parametrize("process", ["master", "agent"])
def test_the_sample_ships_no_secret(process: str) -> None:
    sample, _ = SAMPLES[process]
    env = parse_env_file(sample.read_text())
    assert {k: env[k] for k in SECRETS if k in env} == {k: "" for k in SECRETS if k in env}


@pytest.mark.parametrize("process", ["master", "agent"])
def test_the_opts_line_parses_and_holds_the_code_defaults(process: str) -> None:
    sample, _ = SAMPLES[process]
    command = COMMANDS[process]
    words = shlex.split(parse_env_file(sample.read_text())[OPTS[process]])
    given = settings.parse_args(command, [*REQUIRED[process], *words])
    defaults = settings.parse_args(command, REQUIRED[process])
    flags = {w for w in words if w.startswith("-")}
    by_flag = {long_flag(o): o.name for o in options(command)}
    assert flags <= set(by_flag), f"{OPTS[process]} has flags that are not pai {process}'s"
    changed: dict[str, Any] = {by_flag[f]: (given[by_flag[f]], defaults[by_flag[f]]) for f in flags
                               if given[by_flag[f]] != defaults[by_flag[f]]}
    assert changed == {}, f"{OPTS[process]} differs from the code's defaults (given, default)"


def test_every_master_config_field_is_set_by_a_documented_flag_or_variable_or_listed_as_fixed(tmp_path: Path) -> None:
    """Each flag and variable of the master is given a value of its own; what changes in MasterConfig shows which
    field it sets. A field that none sets is fixed, and the sample must say so by its name."""
    vc_config = tmp_path / "cluster.yaml"
    vc_config.write_text("{}\n")
    base_env = {"PAI_DATA_DIR": str(tmp_path / "base")}
    baseline = config_fields(master_config([], base_env))
    values = {"--host": "10.9.8.7", "--data-dir": str(tmp_path / "d"), "--database-url": "sqlite:////x/pai.db",
              "--vc-config": str(vc_config), "--launcher-port": "9999",
              "--advertise-url": "http://m1.example:9186", "--workers": "3"}
    defaults = settings.parse_args(COMMANDS["master"], [])
    set_by: dict[str, str] = {}
    for option in options(COMMANDS["master"]):
        flag, default = long_flag(option), defaults[option.name or ""]
        if option.is_flag:  # --x/--no-x: the one that is not the default
            args = [(option.secondary_opts if default else option.opts)[0]]
        else:
            args = [flag, values.get(flag) or str(type(default)(default * 2 + 1))]  # a number: another valid one
        args += POSTGRES if flag == "--workers" else []  # API workers are PostgreSQL's
        changed = config_fields(master_config(args, base_env)).items() - baseline.items()
        assert changed, f"pai master {' '.join(args)} changes nothing in MasterConfig"
        set_by.update({name: flag for name, _ in changed})
    env_values = {"PAI_DATA_DIR": str(tmp_path / "e"), "PAI_DATABASE_URL": "sqlite:////y/pai.db",
                  "PAI_VC_CONFIG": str(vc_config), "PAI_MAX_BODY_MB": "9", "PAI_MASTER_LAUNCHER_PORT": "9998",
                  "PAI_MAX_SESSIONS_PER_USER": "3", "PAI_IDLE_TIMEOUT_SECONDS": "99",
                  "PAI_PROXY_MAX_BODY_MB": "7"}
    for name in sorted(settings.env_read_by()["master"]):
        env = {**base_env, name: env_values.get(name, "value-of-" + name)}
        if name == "PAI_MASTER_WORKERS":
            env.update(PAI_MASTER_WORKERS="3", PAI_DATABASE_URL=POSTGRES[1])
        if name == "PAI_LOG_LEVEL":
            continue  # logging, not MasterConfig
        changed = config_fields(master_config([], env)).items() - baseline.items()
        assert changed, f"{name} changes nothing in MasterConfig"
        set_by.update({field: name for field, _ in changed})
    fixed = sorted(baseline.keys() - set_by.keys())
    assert undocumented(MASTER_ENV.read_text(), fixed) == [], "fields no flag or variable sets: list them as fixed"
    assert "LauncherConfig.port_range" in fixed  # the check does tell set fields from fixed ones
    assert set_by["LauncherConfig.node_timeout_seconds"] == "--node-timeout"
