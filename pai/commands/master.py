"""``pai master``: the REST API, the elected launcher and the store: one process on SQLite; on PostgreSQL the launcher's
process and ``--workers`` API worker processes (``pai.rest_server.serve``)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import click
from sqlalchemy import make_url

from pai.commands.logs import setup_logging
from pai.domain.errors import MasterRunningError, PaiError
from pai.domain.timing import FULL_PASS_SECONDS, GRACE_SECONDS
from pai.jobspec.vcconfig import load_cluster_config
from pai.launcher.leadership import Timing
from pai.launcher.service import LauncherConfig
from pai.rest_server.config import MasterConfig
from pai.rest_server.serve import ApiFailedError, serve
from pai.store.db import default_data_dir
from pai.store.keyring import SecretKeyError

_LEASE = Timing()  # the launcher's lease (hidden options: the tests shorten it)


@click.command("master")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=9186, show_default=True, type=int, help="Port (OpenPAI's REST port).")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Data directory (env PAI_DATA_DIR, default ~/.local/share/pai).")
@click.option("--database-url", envvar="PAI_DATABASE_URL", default=None,
              help="SQLAlchemy URL (env PAI_DATABASE_URL); default SQLite in the data directory.")
@click.option("--grace-seconds", default=GRACE_SECONDS, show_default=True, type=float,
              help="How long a stopped or preempted task may take after SIGTERM before SIGKILL.")
@click.option("--node-timeout", default=30.0, show_default=True, type=float,
              help="Seconds without a heartbeat before a node is LOST.")
@click.option("--vc-config", type=click.Path(exists=True, dir_okay=False, path_type=Path), envvar="PAI_VC_CONFIG",
              default=None, help="Cluster configuration (VCs, priority classes, scheduler) applied at start.")
@click.option("--heartbeat", default=1.0, show_default=True, type=float, help="Agents' heartbeat interval.")
@click.option("--max-body-mb", envvar="PAI_MAX_BODY_MB", default=4, show_default=True, type=click.IntRange(min=1),
              help="Largest request body accepted (a job spec); larger ones get 413.")
@click.option("--proxy-max-body-mb", envvar="PAI_PROXY_MAX_BODY_MB", default=64, show_default=True,
              type=click.IntRange(min=1), help="Largest request body (and WebSocket message) relayed to a task's "
              "port through /proxy/; larger ones get 413.")
@click.option("--fence-grace", default=5.0, show_default=True, type=float,
              help="How long a fenced task (its agent lost the master) gets between SIGTERM and SIGKILL.")
@click.option("--full-pass-seconds", default=FULL_PASS_SECONDS, show_default=True, type=click.FloatRange(min=0.1),
              help="How often the scheduler rebuilds its view from the store (passes in between are incremental).")
@click.option("--admissions-per-pass", default=1000, show_default=True, type=click.IntRange(min=1),
              help="The most admissions one scheduling pass acts on; the rest go to the next pass, at once.")
@click.option("--workers", envvar="PAI_MASTER_WORKERS", default=None, type=click.IntRange(min=1),
              help="PostgreSQL: API worker processes serving --port (default: this machine's cores). SQLite serves "
                   "from one process.")
@click.option("--launcher-port", envvar="PAI_MASTER_LAUNCHER_PORT", default=None, type=click.IntRange(1, 65535),
              help="PostgreSQL: the port of this master's launcher, which the agents talk to (default: --port + 2, "
                   "9188; 9187 is the agents' log port).")
@click.option("--usage-sample-seconds", default=60.0, show_default=True, type=click.FloatRange(min=0.1),
              help="How often every VC's usage is sampled for the dashboard's chart (kept 3 days).")
@click.option("--advertise-url", envvar="PAI_MASTER_ADVERTISE_URL", default=None,
              help="The base URL users and the other masters reach this master's API at (its launcher's: the same "
                   "host with --launcher-port); default http://<this machine's name>:<port>.")
@click.option("--lease-seconds", default=_LEASE.lease_seconds, type=click.FloatRange(min=0.1), hidden=True)
@click.option("--lease-renew-seconds", default=_LEASE.renew_every, type=click.FloatRange(min=0.01), hidden=True)
@click.option("--lease-step-down-seconds", default=_LEASE.step_down_after, type=click.FloatRange(min=0.05),
              hidden=True)
def master(host: str, port: int, data_dir: Path | None, database_url: str | None, grace_seconds: float,
           node_timeout: float, vc_config: Path | None, heartbeat: float, max_body_mb: int, proxy_max_body_mb: int,
           fence_grace: float, full_pass_seconds: float, admissions_per_pass: int, workers: int | None,
           launcher_port: int | None, usage_sample_seconds: float, advertise_url: str | None,
           lease_seconds: float, lease_renew_seconds: float, lease_step_down_seconds: float) -> None:
    """Run the master: REST API, scheduler loop and store."""
    setup_logging("master")
    if vc_config is not None:
        try:
            load_cluster_config(vc_config.read_text(), str(vc_config))
        except PaiError as e:
            raise click.ClickException(f"{vc_config}: {e.message}") from None
    try:
        lease = Timing(lease_renew_seconds, lease_seconds, lease_step_down_seconds)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    config = MasterConfig.from_env(
        host=host,
        port=port,
        data_dir=data_dir or default_data_dir(),
        database_url=database_url,
        vc_config=vc_config,
        max_body_bytes=max_body_mb * 1024 * 1024,
        proxy_max_body_bytes=proxy_max_body_mb * 1024 * 1024,
        workers=_workers(workers, database_url),
        launcher_port=launcher_port,
        advertise_url=advertise_url,
        lease=lease,
        launcher=LauncherConfig(
            grace_seconds=grace_seconds, node_timeout_seconds=node_timeout, heartbeat_seconds=heartbeat,
            fence_grace_seconds=fence_grace, full_pass_seconds=full_pass_seconds,
            admissions_per_pass=admissions_per_pass, usage_sample_seconds=usage_sample_seconds,
        ),
    )
    try:
        serve(config, lambda msg: click.echo(msg, err=True), setup_logging)
    except MasterRunningError as e:  # a second master on one SQLite file
        raise click.ClickException(e.message) from None
    except ApiFailedError as e:
        raise click.ClickException(str(e)) from None
    except SecretKeyError as e:  # not the key that sealed this database's secrets (docs/operations.md)
        raise click.ClickException(e.message) from None
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        flag = "--port" if f"port {config.port} " in str(e.strerror) else "--launcher-port"
        raise click.ClickException(f"{e.strerror}; choose another with {flag}") from None


def _workers(asked: int | None, url: str | None) -> int:
    """API worker processes: 0 (one process for everything) on SQLite, which has one writer; on PostgreSQL as many
    as asked, else one per core."""
    if url is None or make_url(url).get_backend_name() == "sqlite":
        if asked is not None and asked > 1:
            raise click.ClickException(f"--workers {asked}: more than one API worker needs PostgreSQL "
                                       "(--database-url postgresql+psycopg://...); SQLite serves from one process")
        return 0
    return asked or os.cpu_count() or 1
