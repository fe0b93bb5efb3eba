"""What every client command shares: one-line errors instead of tracebacks, ``--master``, the connection."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from pai.cli.config import Session, config_path, job_key, load_config, resolve_session
from pai.cli.errors import CliError
from pai.cli.jobview import first_role

if TYPE_CHECKING:
    from pai.cli.api import MasterApi

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, exit_code: int = 1) -> NoReturn:
    """Report ``error: <message>`` on stderr and exit 1 (or ``exit_code``)."""
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(exit_code)


class ClientCommand(click.Command):
    """A command whose failures print one line on stderr: exit 1 for API errors (or the error's own exit_code,
    e.g. 124 for a wait that timed out), 2 for usage (click's)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CliError as exc:
            fail(exc.render(), exc.exit_code)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError):
            raise
        except Exception as exc:
            if os.environ.get("PAI_DEBUG"):
                raise
            fail(f"internal error: {type(exc).__name__}: {exc} (set PAI_DEBUG=1 for a traceback)")


def client_command(name: str | None = None, **kwargs: Any) -> Callable[[F], click.Command]:
    def decorate(func: F) -> click.Command:
        return click.command(name, cls=ClientCommand, **kwargs)(func)

    return decorate


def master_option(func: F) -> F:
    return click.option(
        "--master",
        envvar="PAI_MASTER_URL",
        metavar="URL",
        help="The master's URL (default: the one you logged in to; env PAI_MASTER_URL).",
    )(func)


@dataclass(frozen=True, slots=True)
class Connection:
    session: Session
    api: MasterApi

    def job_key(self, name: str) -> str:
        return job_key(name, self.session.user)

    def experiment_key(self, name: str) -> str:
        """``user~name`` as given, or ``name`` of one of the logged-in user's experiments."""
        return job_key(name, self.session.user, "experiment")

    def task_role(self, name: str, role: str | None) -> tuple[str, str]:
        """The job key that ``name`` stands for, and ``role`` or else the job's first role (a task is named by
        ``--role``/``--index`` with the first role by default)."""
        key = self.job_key(name)
        if role is None:
            role = first_role(self.api.job(key))
            if role is None:
                raise CliError(f"job {key} has no task roles")
        return key, role


def connect(master: str | None) -> Connection:
    """The session for this command (config file, PAI_TOKEN, PAI_USER) and an API client for it."""
    env = os.environ
    session = resolve_session(master, env, load_config(config_path(env)))
    return Connection(session, master_api(session.master, session.token))


def master_api(url: str, token: str | None = None) -> MasterApi:
    """The API client of the master at ``url``. Its HTTP client (urllib's, http.client) is imported here, when a
    command talks to the master: ``pai --help`` and usage errors do not wait for it."""
    from pai.cli.api import MasterApi
    from pai.cli.http import HttpClient

    return MasterApi(HttpClient(url, token))
