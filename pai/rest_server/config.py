"""The master's configuration, from flags and environment."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import Engine

from pai.launcher.leadership import Timing
from pai.launcher.service import LauncherConfig
from pai.store import keyring as keyrings
from pai.store.db import database_url, default_data_dir
from pai.store.keyring import KEY_ENV, Keyring
from pai.store.private import restrict, write_private

AGENT_TOKEN_FILE = "agent-token"


@dataclass(frozen=True, slots=True)
class MasterConfig:
    host: str = "127.0.0.1"
    port: int = 9186  # OpenPAI's REST port
    data_dir: Path = field(default_factory=default_data_dir)
    database_url: str | None = None  # None: PAI_DATABASE_URL, else SQLite in data_dir
    admin_user: str = "admin"
    admin_password: str | None = None  # PAI_ADMIN_PASSWORD; creates the admin on first start
    agent_token: str | None = None  # PAI_AGENT_TOKEN; None: the one kept in <data_dir>/agent-token (made once)
    # PAI_SECRET_KEY: the key(s) sealing job secrets in the database; None: <data_dir>/secret-key (pai.store.keyring)
    secret_key: str | None = field(default=None, repr=False)
    token_ttl_seconds: int = 7 * 24 * 3600
    tick_seconds: float = 0.5
    vc_config: Path | None = None  # a cluster configuration file (job_schemas/vc-config.json) applied at start
    max_body_bytes: int = 4 * 1024 * 1024  # a larger request body is refused with 413 before it is read whole
    # a request through /proxy/ to a task's port streams; one with a larger body (or a WebSocket message either way
    # larger than this) is refused with 413
    proxy_max_body_bytes: int = 64 * 1024 * 1024
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    advertise_url: str | None = None  # the base URL users and other masters reach this one at; None: advertised()
    lease: Timing = field(default_factory=Timing)  # the launcher's lease (pai.launcher.leadership)
    # PostgreSQL: the users' API is served by this many worker processes (gunicorn) and the launcher, with the
    # agents' endpoints, by a process of its own on ``launcher_port``; 0: the embedded topology (one process)
    workers: int = 0
    launcher_port: int | None = None  # None: port + 2 (9188; the agents' log port is 9187)

    def advertised(self) -> str:
        """The base URL of this master's users' API: ``advertise_url``, else ``http://<this machine's name>:<port>``."""
        return (self.advertise_url or f"http://{socket.gethostname()}:{self.port}").rstrip("/")

    @property
    def launcher_port_number(self) -> int:
        return self.port + 2 if self.launcher_port is None else self.launcher_port

    def launcher_url(self) -> str:
        """The base URL of this master's launcher, which the agents talk to (a standby names the leader's to
        them): the API's on the embedded topology; else the advertised API URL with the launcher's port."""
        api = self.advertised()
        if not self.workers:
            return api
        parts = urlsplit(api)
        return urlunsplit((parts.scheme, f"{parts.hostname}:{self.launcher_port_number}", "", "", "")).rstrip("/")

    def db_url(self) -> str:
        return self.database_url or database_url(self.data_dir)

    @property
    def agent_token_file(self) -> Path:
        return self.data_dir / AGENT_TOKEN_FILE

    def resolve_agent_token(self) -> str:
        """The token agents must present: PAI_AGENT_TOKEN / the flag, else the one in the data directory,
        generated on the first start (mode 0600). The agent API is never open."""
        if self.agent_token:
            return self.agent_token
        path = self.agent_token_file
        try:
            token = path.read_text().strip()
        except FileNotFoundError:
            token = ""
        if not token:
            token = secrets.token_urlsafe(32)
            write_private(path, token + "\n")
        restrict(path)  # one left wider by an older version
        return token

    def secret_keyring(self, database: Engine | None = None) -> Keyring:
        """The keys that seal job secrets: ``secret_key``, else the data directory's key file, made on the first start
        of a database no key has sealed yet (pai.store.keyring.load)."""
        env = {KEY_ENV: self.secret_key} if self.secret_key else {}
        return keyrings.load(self.data_dir, create=True, env=env, database=database)

    @classmethod
    def from_env(cls, **overrides: object) -> MasterConfig:
        env: dict[str, object] = {}
        if os.environ.get("PAI_ADMIN_PASSWORD"):
            env["admin_password"] = os.environ["PAI_ADMIN_PASSWORD"]
        if os.environ.get("PAI_AGENT_TOKEN"):
            env["agent_token"] = os.environ["PAI_AGENT_TOKEN"]
        if os.environ.get("PAI_SECRET_KEY"):
            env["secret_key"] = os.environ["PAI_SECRET_KEY"]
        env.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**env)  # type: ignore[arg-type]
