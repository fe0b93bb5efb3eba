"""Public key lines as users paste them: what is one, and why the rest is not (pai.domain.sshkeys)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pai.domain.sshkeys import fingerprint, key_problem, valid_keys


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    key = tmp_path_factory.mktemp("key") / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-C", "me", "-f", str(key)], check=True)
    return key.read_text(), key.with_suffix(".pub").read_text().strip()


def test_a_public_key_line_is_one_and_its_fingerprint_is_ssh_keygens(pair: tuple[str, str], tmp_path: Path) -> None:
    _, public = pair
    assert key_problem(public) is None and key_problem(public.rsplit(" ", 1)[0]) is None  # no comment
    (tmp_path / "k.pub").write_text(public)
    shown = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "k.pub")], capture_output=True, text=True,
                           check=True).stdout.split()[1]
    assert fingerprint(public) == shown


@pytest.mark.parametrize(("line", "words"), [
    ("", "empty"),
    ("ssh-foo AAAA", "does not start with a public key type"),
    ("SHA256:abcdef me", "does not start with a public key type"),
    ("ssh-rsa not-base64!", "not base64"),
    ("ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ== me", "of type 'ssh-rsa', the line says 'ssh-ed25519'"),
])
def test_what_is_not_a_key_says_why(line: str, words: str) -> None:
    problem = key_problem(line)
    assert problem is not None and words in problem


def test_a_private_key_is_named_for_what_it_is(pair: tuple[str, str]) -> None:
    private, _ = pair
    assert "private key" in (key_problem(private) or "")


def test_valid_keys_keeps_each_key_once_in_order(pair: tuple[str, str]) -> None:
    _, public = pair
    assert valid_keys([" junk", public + "  ", public, "ssh-ed25519 x"]) == (public,)
