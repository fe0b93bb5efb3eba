"""A PostgreSQL server of a test's own, for tests that stop or restart the database under the masters (the shared
server at 127.0.0.1:5432 is not theirs to stop). Debian's server binaries (``/usr/lib/postgresql/<version>/bin``:
initdb, pg_ctl; the newest version found); the tests that need one skip only where they are not installed.

initdb and the server refuse to run as root: as root (CI) they run as the ``postgres`` user (``runuser``), in a
directory under the system's temp directory that it owns (pytest's temp directories are root's alone). The server
listens on 127.0.0.1 at a free port, its Unix socket in that directory, trust auth, fsync off (a test's data)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from pai.store.db import normalize_url
from tests.e2e.harness import free_port

BINARIES = "/usr/lib/postgresql/*/bin"
SERVER_USER = "postgres"  # who runs the server when the tests run as root


def binaries() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` with initdb and pg_ctl, or None."""
    found = [p for p in Path("/").glob(BINARIES.lstrip("/")) if (p / "initdb").exists() and (p / "pg_ctl").exists()]
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, default=None)


def require_binaries() -> Path:
    """The binaries' directory; skips the calling test where PostgreSQL's server is not installed."""
    found = binaries()
    if found is None:
        pytest.skip(f"PostgreSQL's server binaries are not installed (no initdb and pg_ctl in {BINARIES}); "
                    "Debian's postgresql package has them")
    return found


@dataclass
class PgServer:
    bin: Path
    root: Path  # owned by the server's user: the data directory, the socket, the log
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.root)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}\n"
                               f"{self.log.read_text(errors='replace')[-3000:] if self.log.exists() else ''}")

    def start(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", mode, "-w", "-t", "60", "restart")

    def create_database(self, name: str) -> str:
        """A new database ``name`` with pg_trgm installed (as an operator would: pai's migrations use it); its URL."""
        admin = create_engine(normalize_url(self.url()), isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            admin.dispose()
        engine = create_engine(normalize_url(self.url(name)), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
        finally:
            engine.dispose()
        return self.url(name)


@contextmanager
def pg_server() -> Iterator[PgServer]:
    """A fresh server, started; stopped (immediate) and deleted on exit."""
    bin_dir = require_binaries()
    root = Path(tempfile.mkdtemp(prefix="pai-pg-"))
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam(SERVER_USER)
        except KeyError:
            raise RuntimeError(f"running as root, the test server needs the user {SERVER_USER!r} to run it "
                               "(initdb refuses root); Debian's postgresql package makes it") from None
        os.chown(root, user.pw_uid, user.pw_gid)
    server = PgServer(bin_dir, root, free_port())
    try:
        server.run("initdb", "-D", str(server.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale",
                   "--no-sync")
        with (server.data / "postgresql.conf").open("a") as conf:
            conf.write(f"port = {server.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{root}'\n"
                       "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
        server.start()
        yield server
    finally:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            if (server.data / "postmaster.pid").exists():
                server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
