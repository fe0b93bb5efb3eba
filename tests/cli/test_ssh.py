"""pai ssh-key (the user's extension.sshKeys, as OpenPAI's portal writes it) and pai ssh --config against a real HTTP
server; pai ssh itself runs OpenSSH on a real cluster (tests/e2e/test_ssh.py)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from pai.cli.ssh import config_entry

from .conftest import Run
from .fake_master import FakeMaster

ME = "/api/v2/users/admin"


def keypair(tmp_path: Path, comment: str = "me@laptop") -> tuple[Path, str]:
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)], check=True)
    return key, key.with_suffix(".pub").read_text().strip()


def test_a_key_is_added_to_the_users_extension(run: Run, logged_in: FakeMaster, tmp_path: Path) -> None:
    key, public = keypair(tmp_path)
    old = {"title": "old", "value": "ssh-ed25519 AAAAold", "time": 1}
    logged_in.reply("GET", ME, {"username": "admin", "extension": {"sshKeys": [old], "other": 1}})
    logged_in.reply("PUT", "/api/v2/users/me", {"message": "Update user admin successfully"}, status=201)
    result = run("ssh-key", "add", str(key.with_suffix(".pub")))
    assert result.exit_code == 0, result.output
    assert "added key 'me@laptop'" in result.stdout
    body = logged_in.only("PUT", "/api/v2/users/me").json()
    added = body["data"]["extension"]["sshKeys"][1]
    assert body["patch"] is True and body["data"]["username"] == "admin"
    assert body["data"]["extension"]["sshKeys"][0] == old
    assert (added["title"], added["value"]) == ("me@laptop", public) and added["time"] > 1_600_000_000_000


def test_what_is_not_a_public_key_is_refused_before_asking(run: Run, logged_in: FakeMaster, tmp_path: Path) -> None:
    key, _ = keypair(tmp_path)
    result = run("ssh-key", "add", str(key))
    assert result.exit_code == 1 and "it is a private key" in result.stderr
    assert logged_in.requests == []


def test_a_title_or_a_key_twice_is_refused(run: Run, logged_in: FakeMaster, tmp_path: Path) -> None:
    key, public = keypair(tmp_path)
    logged_in.reply("GET", ME, {"username": "admin", "extension": {"sshKeys": [
        {"title": "me@laptop", "value": "ssh-ed25519 AAAAx", "time": 1}]}})
    assert "titled 'me@laptop' already" in run("ssh-key", "add", str(key.with_suffix(".pub"))).stderr
    logged_in.reset()
    logged_in.reply("GET", ME, {"username": "admin", "extension": {"sshKeys": [
        {"title": "laptop", "value": public, "time": 1}]}})
    result = run("ssh-key", "add", "--title", "again", "-", input=public + "\n")  # from stdin
    assert result.exit_code == 1 and "you have this key already" in result.stderr
    assert [r.method for r in logged_in.requests] == ["GET"]


def test_keys_are_listed_with_their_fingerprints_and_removed_by_title(run: Run, logged_in: FakeMaster,
                                                                      tmp_path: Path) -> None:
    key, public = keypair(tmp_path)
    shown = subprocess.run(["ssh-keygen", "-l", "-f", str(key)], capture_output=True, text=True, check=True).stdout
    keys = [{"title": "a", "value": public, "time": 1}, {"title": "b", "value": "junk", "time": 2}]
    logged_in.reply("GET", ME, {"username": "admin", "extension": {"sshKeys": keys}})
    logged_in.reply("PUT", "/api/v2/users/me", {"message": "ok"}, status=201)
    listed = run("ssh-key", "list")
    assert listed.stdout.splitlines() == [f"a\tssh-ed25519 {shown.split()[1]}", "b\t(not a public key)"]
    assert run("ssh-key", "remove", "b").exit_code == 0
    assert logged_in.only("PUT", "/api/v2/users/me").json()["data"]["extension"]["sshKeys"] == keys[:1]
    assert "no key titled 'c'" in run("ssh-key", "remove", "c").stderr


def test_the_config_entry_runs_the_proxy_for_the_task(run: Run, logged_in: FakeMaster) -> None:
    result = run("ssh", "box", "--role", "worker", "--index", "1", "--config")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:3] == ["Host pai-admin-box-worker-1", "  HostName pai-admin-box-worker-1", "  User root"]
    assert lines[4:] == ["  HostKeyAlias pai-admin-box-worker-1", "  StrictHostKeyChecking accept-new",
                         "  ServerAliveInterval 30"]
    proxy = shlex.split(lines[3].removeprefix("  ProxyCommand "))
    assert proxy[1:] == ["-P", "-m", "pai.cli.sshproxy", "admin~box", "--role", "worker", "--index", "1", "--proxy"]
    assert logged_in.requests == []  # the role was given: nothing to ask


def test_percent_signs_are_doubled_for_ssh() -> None:
    assert "--master http://m/%%7e" in config_entry("a~b", "w", 0, "http://m/%7e")
