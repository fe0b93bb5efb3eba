"""pai login / logout and how commands pick their master and token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.filemodes import mode

from .conftest import TOKEN, Run
from .fake_master import FakeMaster

LOGIN = "/api/v2/authn/basic/login"
LOGOUT = "/api/v2/authn/basic/logout"


def test_login_posts_credentials_and_stores_token_with_mode_0600(
    run: Run, master: FakeMaster, config_file: Path
) -> None:
    master.reply("POST", LOGIN, {"token": "t-1", "user": "admin", "admin": True})
    result = run("login", "--master", master.url + "/", "--user", "admin", "--password", "pw", "--expiration", "60")
    assert result.exit_code == 0, result.output
    sent = master.only("POST", LOGIN)
    assert sent.json() == {"username": "admin", "password": "pw", "expiration": 60}
    assert sent.headers["Content-Type"] == "application/json"
    assert "Authorization" not in sent.headers
    assert json.loads(config_file.read_text()) == {"master": master.url, "user": "admin", "token": "t-1"}
    assert mode(config_file) == 0o600
    assert f"Logged in to {master.url} as admin (admin)" in result.stdout


def test_login_replaces_a_world_readable_config_with_a_0600_one(
    run: Run, master: FakeMaster, config_file: Path
) -> None:
    config_file.parent.mkdir(parents=True)
    config_file.write_text("{}")
    config_file.chmod(0o644)
    master.reply("POST", LOGIN, {"token": "t-2", "user": "bob", "admin": False})
    assert run("login", "--master", master.url, "--user", "bob", "--password", "pw").exit_code == 0
    assert mode(config_file) == 0o600
    assert json.loads(config_file.read_text())["token"] == "t-2"


def test_login_prompts_for_what_is_missing_and_hides_the_password(run: Run, master: FakeMaster) -> None:
    master.reply("POST", LOGIN, {"token": "t-3", "user": "carol", "admin": False})
    result = run("login", input=f"{master.url}\ncarol\nsecret-pw\n")
    assert result.exit_code == 0, result.output
    assert master.only("POST", LOGIN).json() == {"username": "carol", "password": "secret-pw"}
    assert "Master URL [http://127.0.0.1:9186]:" in result.output
    assert "secret-pw" not in result.output


def test_login_reads_the_environment(run: Run, master: FakeMaster,
    monkeypatch: pytest.MonkeyPatch, config_file: Path
) -> None:
    monkeypatch.setenv("PAI_MASTER_URL", master.url)
    monkeypatch.setenv("PAI_USER", "dave")
    monkeypatch.setenv("PAI_PASSWORD", "env-pw")
    master.reply("POST", LOGIN, {"token": "t-4", "user": "dave", "admin": False})
    result = run("login")
    assert result.exit_code == 0, result.output
    assert master.only("POST", LOGIN).json() == {"username": "dave", "password": "env-pw"}
    assert json.loads(config_file.read_text())["master"] == master.url


def test_failed_login_is_one_line_and_writes_nothing(run: Run, master: FakeMaster, config_file: Path) -> None:
    master.error("POST", LOGIN, 401, "UnauthorizedUserError", "bad user name or password")
    result = run("login", "--master", master.url, "--user", "admin", "--password", "wrong")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith("error: UnauthorizedUserError: bad user name or password")
    assert not config_file.exists()


def test_commands_send_the_stored_token(run: Run, logged_in: FakeMaster) -> None:
    logged_in.reply("GET", "/api/v2/nodes", [])
    assert run("nodes").exit_code == 0
    assert logged_in.only("GET", "/api/v2/nodes").headers["Authorization"] == f"Bearer {TOKEN}"


def test_pai_token_overrides_the_stored_token(run: Run, logged_in: FakeMaster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAI_TOKEN", "from-env")
    logged_in.reply("GET", "/api/v2/nodes", [])
    assert run("nodes").exit_code == 0
    assert logged_in.only("GET", "/api/v2/nodes").headers["Authorization"] == "Bearer from-env"


def test_stored_token_is_not_sent_to_another_master(run: Run, master: FakeMaster, config_file: Path) -> None:
    config_file.parent.mkdir(parents=True)
    config_file.write_text(json.dumps({"master": "http://elsewhere:9186", "user": "admin", "token": TOKEN}))
    master.reply("GET", "/api/v2/nodes", [])
    assert run("nodes", "--master", master.url).exit_code == 0
    assert "Authorization" not in master.only("GET", "/api/v2/nodes").headers


def test_unauthorized_answer_suggests_logging_in(run: Run, master: FakeMaster) -> None:
    master.error("GET", "/api/v2/nodes", 401, "UnauthorizedUserError", "no token")
    result = run("nodes", "--master", master.url)
    assert result.exit_code == 1
    assert result.stderr == "error: UnauthorizedUserError: no token (log in with `pai login`, or set PAI_TOKEN)\n"


def test_logout_revokes_and_forgets_the_token_but_keeps_master_and_user(
    run: Run, logged_in: FakeMaster, config_file: Path
) -> None:
    logged_in.reply("DELETE", LOGOUT, {"message": "Logout successfully"})
    result = run("logout")
    assert result.exit_code == 0
    assert logged_in.only("DELETE", LOGOUT).headers["Authorization"] == f"Bearer {TOKEN}"
    assert result.stdout == f"Logged out of {logged_in.url}.\n"
    assert json.loads(config_file.read_text()) == {"master": logged_in.url, "user": "admin"}
    assert mode(config_file) == 0o600
    assert run("logout").stdout == "Not logged in.\n"


def test_logout_forgets_the_token_even_when_the_master_refuses(
    run: Run, logged_in: FakeMaster, config_file: Path
) -> None:
    logged_in.error("DELETE", LOGOUT, 401, "UnauthorizedUserError", "the token is invalid or has expired")
    result = run("logout")
    assert result.exit_code == 0
    assert result.stdout == (f"Logged out of {logged_in.url} (the master did not revoke the token: "
                             "the token is invalid or has expired).\n")
    assert json.loads(config_file.read_text()) == {"master": logged_in.url, "user": "admin"}


def test_corrupt_config_file_is_a_clear_error(run: Run, config_file: Path) -> None:
    config_file.parent.mkdir(parents=True)
    config_file.write_text("{not json")
    result = run("nodes")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot use config file {config_file}: ")
    assert len(result.stderr.splitlines()) == 1
