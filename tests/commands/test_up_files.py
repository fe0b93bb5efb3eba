"""``pai up`` keeps its admin password and agent token in a 0600 file of a 0700 data directory, whatever the umask."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.commands.up import _credentials
from tests.filemodes import mode, umask


@pytest.mark.parametrize(("before", "kept"), [(None, False), (0o644, True)],
                         ids=["a new data dir", "a file left readable by an older version"])
def test_the_credentials_file_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before: int | None,
                                         kept: bool) -> None:
    monkeypatch.delenv("PAI_ADMIN_PASSWORD", raising=False)
    monkeypatch.delenv("PAI_AGENT_TOKEN", raising=False)
    data = tmp_path / "data"
    if before is not None:
        data.mkdir(mode=0o755)
        (data / "up-credentials").write_text("pw-before\ntoken-before\n")
        (data / "up-credentials").chmod(before)
    with umask(0o022):
        password, token = _credentials(data)
    assert (mode(data), mode(data / "up-credentials")) == (0o700, 0o600)
    assert _credentials(data) == (password, token)
    assert ((password, token) == ("pw-before", "token-before")) is kept  # an older file's credentials are kept
