"""Pulling a task's image: "the registry says there is no such image" told from "the registry could not be asked".

The Docker Engine answers a failed pull with words, not codes. Moby's ``distribution/errors.go`` turns the
registry's own answers into a 404 with fixed phrases (``manifest for X not found: manifest unknown``,
``repository X not found: name unknown``, ``pull access denied for X, repository does not exist or may require
'docker login'``); everything else is a 500 that carries the transport's words (``dial tcp ...: connection
refused``, ``lookup ... no such host``, ``received unexpected HTTP status: 503 Service Unavailable``,
``toomanyrequests: ...``), or an ``error`` line in the pull's stream when it breaks after the first layer.
:func:`classify` reads them through :data:`CASES`, first match wins, and what no case names counts as "could
not ask": only the registry's own answer makes an image missing.

* ``MISSING``, ``INVALID``: -101 ``ImageNotFound`` (user, permanent).
* ``DENIED``, the registry refused the credentials (``unauthorized``, ``no basic auth credentials``): -101 as
  well, with its own words in the reason. A retry with the same credentials gets the same answer, and the
  engine cannot tell a private repository from an absent one anyway (Docker Hub says ``denied`` for both).
* ``NODE_DISK``: the node's own disk is full or read-only (the engine's data root): -210 ``NodeDiskFull``
  (platform, transient: requeued, not counted), not retried within the attempt (a full disk does not empty itself
  in seconds). The agent's health checks its work directory, not the engine's data root.
* ``UNREACHABLE``: retried within the attempt (:class:`PullRetry`: 3 tries, 2 s then 4 s apart), then -102
  ``ImagePullFailed`` (platform, transient: the job is requeued, not counted against its retries).

The shell (:func:`obtain_image`) pulls through the engine's stream, so that an error after the first progress
line is read too (docker SDK's ``images.pull`` drops it and then reports "no such image").
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import docker
import docker.errors
import requests

from pai.nodeagent.logfmt import BoundLogger
from pai.protocol import PlatformExit, RegistryCredentials


class Outcome(StrEnum):
    MISSING = "missing"  # the registry says the repository, tag or platform does not exist
    INVALID = "invalid"  # the name cannot name an image
    DENIED = "denied"  # the registry refused the credentials (or their absence)
    UNREACHABLE = "unreachable"  # the registry could not be asked or did not answer the question
    NODE_DISK = "node disk"  # the node's own disk is full or read-only: the node's fault (as nodeagent.diskguard)

    @property
    def exit_code(self) -> PlatformExit:
        return _EXITS.get(self, PlatformExit.IMAGE_NOT_FOUND)


_EXITS = {Outcome.UNREACHABLE: PlatformExit.IMAGE_PULL_FAILED, Outcome.NODE_DISK: PlatformExit.NODE_DISK_FULL}


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    outcome: Outcome
    pattern: str = ""  # a regular expression searched in the engine's message, case-insensitively
    status: int | None = None  # or the engine's HTTP status

    def matches(self, status: int | None, message: str) -> bool:
        if self.status is not None and status == self.status:
            return True
        return bool(self.pattern) and re.search(self.pattern, message, re.IGNORECASE) is not None


MISSING, INVALID, DENIED, UNREACHABLE = Outcome.MISSING, Outcome.INVALID, Outcome.DENIED, Outcome.UNREACHABLE
CASES: tuple[Case, ...] = (
    # The registry's own answers first: the engine's phrases for them end its message, after the image's name.
    Case("manifest unknown", MISSING, r"manifest unknown|manifest for \S+ not found"),
    Case("repository unknown", MISSING,
         r"name unknown|repository \S+ not found|repository does not exist|not found: does not exist or no pull"),
    Case("no image for this platform", MISSING, r"no matching manifest|does not match the specified platform"),
    Case("invalid reference", INVALID, r"invalid reference format|repository name must", status=400),
    # Could not ask, or no answer to the question: worth asking again.
    Case("rate limited", UNREACHABLE, r"toomanyrequests|too many requests|rate limit|status: 429\b"),
    Case("registry error 5xx", UNREACHABLE,
         r"(http status|http|status code):? 5\d\d\b"
         r"|\b5\d\d (internal server error|bad gateway|service unavailable|gateway time-?out)"),
    Case("name resolution failed", UNREACHABLE, r"no such host|server misbehaving|name resolution|lookup \S+ on \S+"),
    Case("connection failed", UNREACHABLE,
         r"connection refused|connection reset|no route to host|network is unreachable|broken pipe|\beof\b"
         r"|connection aborted|max retries exceeded"),
    Case("timeout", UNREACHABLE, r"time-?out|timed out|deadline exceeded|request canceled"),
    Case("TLS or protocol mismatch", UNREACHABLE, r"x509|certificate|tls:|http response to https client"),
    Case("the node's disk full or read-only", Outcome.NODE_DISK, r"no space left on device|read-only file system"),
    Case("the node's own error", UNREACHABLE, r"(: connect|\b(open|mkdir|write) \S+): permission denied"),
    Case("layer missing in the registry", UNREACHABLE, r"unknown blob|blob unknown"),  # the registry is broken
    # The registry refused the credentials: the same ones get the same answer.
    Case("credentials refused", DENIED,
         r"unauthorized|authentication required|no basic auth credentials|incorrect username or password"
         r"|\bdenied\b|http status: 40[13]\b"),
    Case("the engine's not-found", MISSING, status=404),  # moby answers 404 only for the registry's not-found codes
)
UNRECOGNISED = Case("unrecognised error", UNREACHABLE)  # only the registry's own answer makes an image missing


def classify(status: int | None, message: str) -> Case:
    """The case of a failed pull, from the engine's HTTP status (None for an error in the pull's stream or on
    the way to the engine) and its message."""
    return next((c for c in CASES if c.matches(status, message)), UNRECOGNISED)


@dataclass(frozen=True, slots=True)
class PullRetry:
    """How often an unreachable registry is asked again within one attempt before it ends -102."""
    tries: int = 3
    first_delay: float = 2.0
    factor: float = 2.0

    def delays(self) -> tuple[float, ...]:
        """The waits between tries."""
        return tuple(self.first_delay * self.factor ** n for n in range(max(0, self.tries - 1)))


@dataclass(frozen=True, slots=True)
class PullFailure:
    exit_code: int
    reason: str


def failure(image: str, case: Case, message: str, tries: int) -> PullFailure:
    """How the attempt ends, quoting the engine's words."""
    said = _quote(message)
    if case.outcome is Outcome.UNREACHABLE:
        n = "1 try" if tries == 1 else f"{tries} tries"
        return PullFailure(int(case.outcome.exit_code), f"image {image!r} could not be pulled ({case.name}, {n}): "
                                                        f"{said}")
    if case.outcome is Outcome.NODE_DISK:
        return PullFailure(int(case.outcome.exit_code), f"image {image!r} could not be stored on this node "
                                                        f"({case.name}): {said}")
    if case.outcome is Outcome.DENIED:
        return PullFailure(int(case.outcome.exit_code), f"the registry refused to let image {image!r} be pulled "
                                                        f"(check the job's registry credentials): {said}")
    return PullFailure(int(case.outcome.exit_code), f"image {image!r} does not exist ({case.name}): {said}")


def _quote(message: str) -> str:
    text = " ".join(message.split())
    return text[:500] or "(no message)"


# -- the shell: pull through the engine, retry what may pass -------------------------------------------------


class StreamError(Exception):
    """An ``error`` line in the engine's pull stream."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def engine_error(e: Exception) -> tuple[int | None, str]:
    """The engine's HTTP status and words for a failed pull."""
    if isinstance(e, docker.errors.APIError):
        return e.status_code, str(e.explanation or e)
    if isinstance(e, StreamError):
        return None, e.message
    return None, str(e) or type(e).__name__


def pull_once(client: docker.DockerClient, image: str, auth: RegistryCredentials | None) -> bool:
    """Pull ``image`` unless the engine has it; whether it pulled (blocking: run it in a worker thread)."""
    try:
        client.api.inspect_image(image)
        return False
    except docker.errors.NotFound:
        pass
    credentials = None if auth is None else {
        "username": auth.username, "password": auth.password, "serveraddress": auth.registry or None}
    for line in client.api.pull(image, stream=True, decode=True, auth_config=credentials):
        if isinstance(line, dict) and line.get("error"):
            raise StreamError(str(line["error"]))
    return True


async def obtain_image(client: docker.DockerClient, image: str, auth: RegistryCredentials | None, *,
                       retry: PullRetry, log: BoundLogger, fields: dict[str, Any],
                       stopping: Callable[[], bool]) -> PullFailure | None:
    """None once the engine has ``image``; else how the attempt ends. An unreachable registry is asked
    ``retry.tries`` times; a stop meanwhile ends the waiting."""
    delays = retry.delays()
    n = 0
    while True:
        n += 1
        try:
            if await asyncio.to_thread(pull_once, client, image, auth):
                log.info("image pulled", extra=fields | {"image": image, "authenticated": auth is not None})
            return None
        except (docker.errors.DockerException, requests.RequestException, StreamError) as e:
            status, message = engine_error(e)
        case = classify(status, message)
        log.warning("image pull failed", extra=fields | {"image": image, "case": case.name,
                                                         "outcome": case.outcome.value, "try": n,
                                                         "error": _quote(message)})
        if case.outcome is not Outcome.UNREACHABLE or n > len(delays):
            return failure(image, case, message, n)
        await _wait(delays[n - 1], stopping)
        if stopping():
            return failure(image, case, message, n)


async def _wait(seconds: float, stopping: Callable[[], bool]) -> None:
    """Sleep ``seconds``, or less once a stop is asked for."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not stopping() and (left := deadline - loop.time()) > 0:
        await asyncio.sleep(min(0.2, left))
