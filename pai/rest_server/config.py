"""The master's configuration, from flags and environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pai.launcher.service import LauncherConfig
from pai.store.db import database_url, default_data_dir


@dataclass(frozen=True, slots=True)
class MasterConfig:
    host: str = "127.0.0.1"
    port: int = 9186  # OpenPAI's REST port
    data_dir: Path = field(default_factory=default_data_dir)
    database_url: str | None = None  # None: PAI_DATABASE_URL, else SQLite in data_dir
    admin_user: str = "admin"
    admin_password: str | None = None  # PAI_ADMIN_PASSWORD; creates the admin on first start
    agent_token: str | None = None  # PAI_AGENT_TOKEN; when set, agents must present it
    token_ttl_seconds: int = 7 * 24 * 3600
    tick_seconds: float = 0.5
    vc_config: Path | None = None  # a cluster configuration file (job_schemas/vc-config.json) applied at start
    launcher: LauncherConfig = field(default_factory=LauncherConfig)

    def db_url(self) -> str:
        return self.database_url or database_url(self.data_dir)

    @classmethod
    def from_env(cls, **overrides: object) -> MasterConfig:
        env: dict[str, object] = {}
        if os.environ.get("PAI_ADMIN_PASSWORD"):
            env["admin_password"] = os.environ["PAI_ADMIN_PASSWORD"]
        if os.environ.get("PAI_AGENT_TOKEN"):
            env["agent_token"] = os.environ["PAI_AGENT_TOKEN"]
        env.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**env)  # type: ignore[arg-type]
