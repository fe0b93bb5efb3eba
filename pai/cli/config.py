"""The client's config file (``{master, user, token}``) and how a command picks its master and token (stdlib only:
ssh's ProxyCommand, ``pai.cli.sshproxy``, reads them too)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from pai.cli.errors import CliError, JobNameError
from pai.cli.urls import normalize_url

DEFAULT_MASTER = "http://127.0.0.1:9186"
FILE_MODE = 0o600


class ConfigFileError(CliError):
    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"cannot use config file {path}: {detail}")
        self.path = path
        self.detail = detail


@dataclass(frozen=True, slots=True)
class CliConfig:
    """What ``pai login`` stores. Empty fields mean "not logged in"."""

    master: str | None = None
    user: str | None = None
    token: str | None = None


def config_path(env: Mapping[str, str]) -> Path:
    explicit = env.get("PAI_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    return Path(env.get("HOME", "~")).expanduser() / ".config" / "pai" / "config.json"


def load_config(path: Path) -> CliConfig:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return CliConfig()
    except (OSError, ValueError) as exc:
        raise ConfigFileError(path, str(exc)) from None
    if not isinstance(raw, dict):
        raise ConfigFileError(path, "not a JSON object")
    return CliConfig(**{k: str(raw[k]) for k in ("master", "user", "token") if raw.get(k)})


def save_config(path: Path, config: CliConfig) -> None:
    """Write atomically with mode 0600 (the file holds a bearer token)."""
    import tempfile  # only ``pai login`` and ``pai logout`` write: the other commands do not wait for it

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".config-", dir=path.parent)
        try:
            os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, "w") as f:
                json.dump({k: v for k, v in asdict(config).items() if v is not None}, f, indent=2)
                f.write("\n")
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ConfigFileError(path, exc.strerror or str(exc)) from None


@dataclass(frozen=True, slots=True)
class Session:
    """The master a command talks to, with the token and user that go with it."""

    master: str
    token: str | None
    user: str | None


def resolve_session(master: str | None, env: Mapping[str, str], config: CliConfig) -> Session:
    """``--master``/PAI_MASTER_URL, else the stored master; PAI_TOKEN/PAI_USER override what is stored.

    A stored token is used only against the master it came from.
    """
    stored = normalize_url(config.master) if config.master else None
    url = normalize_url(master) if master else (stored or DEFAULT_MASTER)
    same = stored == url
    token = env.get("PAI_TOKEN") or (config.token if same else None)
    user = env.get("PAI_USER") or (config.user if same else None)
    return Session(master=url, token=token, user=user)


def job_key(name: str, user: str | None, kind: str = "job") -> str:
    """``user~job`` as given, or ``job`` qualified with the logged-in user (an experiment's key alike)."""
    if "~" in name:
        return name
    if not user:
        raise JobNameError(name, kind)
    return f"{user}~{name}"
