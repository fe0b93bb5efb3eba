"""Errors the CLI reports as one line on stderr (``error: ...``), with exit code 1 unless the error says otherwise.

The exit codes of the commands that wait for a job (``pai submit --wait``, ``pai up --run``): 0 the job
SUCCEEDED; 1 it ended otherwise (FAILED, STOPPED), or an error; 124 the wait timed out (the job runs on), as
``timeout(1)``. ``pai up`` exits 3 when its master or its agent dies.
"""

from __future__ import annotations

EXIT_WAIT_TIMEOUT = 124


class CliError(Exception):
    """Base of every error a client command reports without a traceback."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def render(self) -> str:
        return self.message


class ApiError(CliError):
    """The master answered with a non-2xx status and (usually) an OpenPAI ``{code, message}`` body."""

    def __init__(self, status: int, code: str, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.line = line  # the line of the submitted document that writes the field at fault, where the master says

    def render(self) -> str:
        where = f" (line {self.line} of the document)" if self.line is not None else ""
        hint = " (log in with `pai login`, or set PAI_TOKEN)" if self.status == 401 else ""
        return f"{self.code}: {self.message}{where}{hint}"


class UnreachableError(CliError):
    """No HTTP answer at all: connection refused, DNS failure, timeout, reset."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the master at {url}: {reason}")
        self.url = url
        self.reason = reason


class BadResponseError(CliError):
    """A 2xx answer the client cannot read (not JSON where JSON was promised)."""

    def __init__(self, method: str, url: str, detail: str) -> None:
        super().__init__(f"unexpected answer from the master to {method} {url}: {detail}")
        self.method = method
        self.url = url
        self.detail = detail


class SpecFileError(CliError):
    """A job spec file the client cannot read or parse before sending it."""

    def __init__(self, source: str, detail: str) -> None:
        super().__init__(f"cannot read job spec {source}: {detail}")
        self.source = source
        self.detail = detail


class JobNameError(CliError):
    """A bare job (or experiment) name given while no user is known to qualify it."""

    def __init__(self, name: str, kind: str = "job") -> None:
        super().__init__(f"cannot tell whose {kind} {name!r} is: give it as user~{kind}, or log in with `pai login`")
        self.name = name
        self.kind = kind


class WaitTimeoutError(CliError):
    """``submit --wait`` (or ``up --run``) gave up before the job (or experiment) reached a terminal state."""

    exit_code = EXIT_WAIT_TIMEOUT

    def __init__(self, job: str, timeout: float, state: str, kind: str = "job") -> None:
        super().__init__(f"{kind} {job} is still {state} after {timeout:g}s")
        self.job = job
        self.timeout = timeout
        self.state = state
