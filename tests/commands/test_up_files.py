"""``pai up`` keeps its admin password and agent token in a 0600 file of a 0700 data directory, whatever the umask."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pai.commands.up import _credentials
from tests.filemodes import mode


@pytest.mark.parametrize("before", [None, 0o644], ids=["a new data dir", "a file left readable by an older version"])
def test_the_credentials_file_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before: int | None) -> None:
    monkeypatch.delenv("PAI_ADMIN_PASSWORD", raising=False)
    monkeypatch.delenv("PAI_AGENT_TOKEN", raising=False)
    data = tmp_path / "data"
    if before is not None:
        data.mkdir(mode=0o755)
        (data / "up-credentials").write_text("pw-before\ntoken-before\n")
        (data / "up-credentials").chmod(before)
    old = os.umask(0o022)
    try:
        password, token = _credentials(data)
    finally:
        os.umask(old)
    assert (mode(data), mode(data / "up-credentials")) == (0o700, 0o600)
    assert _credentials(data) == (password, token)
    assert before is None or (password, token) == ("pw-before", "token-before")
