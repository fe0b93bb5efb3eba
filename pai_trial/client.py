"""The trial's side of the wire (see the package's docstring): one ``TrialClient`` per trial, urllib only."""

from __future__ import annotations

import json
import math
import numbers
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

RETRIED_STATUSES = frozenset({502, 503, 504})  # a master restarting, or the proxy in front of it


class TrialError(Exception):
    """The master refused a request (a 4xx, or a 5xx it kept answering): ``status`` and its ``{code, message}``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class MasterUnreachableError(ConnectionError):
    """The master did not answer through every retry."""


def check_step(step: object) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or int(step) < 0:
        raise ValueError(f"step must be an integer 0 or more, not {step!r}")
    return int(step)


def check_metrics(metrics: Mapping[str, object]) -> dict[str, float]:
    """The values as floats; ValueError naming the first one that is not a finite number (NaN, inf, a string)."""
    if not metrics:
        raise ValueError("report at least one metric")
    checked: dict[str, float] = {}
    for name, value in metrics.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"a metric's name must be a non-empty string, not {name!r}")
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            raise ValueError(f"metric {name} must be a finite number, not {value!r}")
        checked[name] = float(value)
    return checked


class TrialClient:
    """Reports of one trial to the master at ``master_url``, with the trial's ``token``.

    Connection errors and 502/503/504 are retried ``attempts`` times in all, waiting ``backoff`` seconds, then twice
    that, up to ``max_backoff`` (safe: every request is idempotent); any other error answer raises TrialError."""

    def __init__(self, trial_id: str, token: str, master_url: str, hparams: Mapping[str, Any] | None = None, *,
                 attempts: int = 12, backoff: float = 0.5, max_backoff: float = 15.0, timeout: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.trial_id = trial_id
        self.base = f"{master_url.rstrip('/')}/api/v2/trials/{trial_id}"
        self.hparams: dict[str, Any] = dict(hparams or {})
        self._token = token
        self._attempts, self._backoff, self._max_backoff = max(1, attempts), backoff, max_backoff
        self._timeout = timeout
        self._sleep = sleep
        self._stop = False

    def report(self, step: int, metrics: Mapping[str, object]) -> bool:
        """Send the values of ``step``; whether the searcher wants the trial to stop (also ``should_stop()``)."""
        body = {"step": check_step(step), "metrics": check_metrics(metrics)}
        answer = self._call("POST", "/metrics", body)
        self._stop = bool(answer.get("stop", False)) if isinstance(answer, dict) else False
        return self._stop

    def should_stop(self) -> bool:
        """The answer of the last report (False before the first)."""
        return self._stop

    def checkpoint(self, step: int, path: str, metadata: Mapping[str, Any] | None = None) -> None:
        """Record that the trial wrote a checkpoint of ``step`` at ``path`` (a path its retried self can read)."""
        if not isinstance(path, str) or not path:
            raise ValueError(f"a checkpoint's path must be a non-empty string, not {path!r}")
        self._call("POST", "/checkpoints", {"step": check_step(step), "path": path, "metadata": dict(metadata or {})})

    def latest_checkpoint(self) -> dict[str, Any] | None:
        """The checkpoint of the highest step the trial recorded (``{"step", "path", "metadata"}``), None if none."""
        answer = self._call("GET", "/checkpoints/latest", None)
        return answer if isinstance(answer, dict) else None

    def _call(self, method: str, path: str, body: object) -> Any:
        data = None if body is None else json.dumps(body, allow_nan=False).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self._token}", "Content-Type": "application/json", "Accept": "application/json"})
        wait = self._backoff
        for attempt in range(1, self._attempts + 1):
            try:
                with urllib.request.urlopen(request, timeout=self._timeout) as response:
                    raw = response.read()
                return json.loads(raw) if raw else None
            except urllib.error.HTTPError as e:
                if e.code not in RETRIED_STATUSES or attempt == self._attempts:
                    raise _refusal(e) from None
            except OSError as e:  # refused, reset, timed out, a name that does not resolve (yet)
                if attempt == self._attempts:
                    raise MasterUnreachableError(f"{method} {request.full_url}: no answer after {attempt} attempts "
                                                 f"({e})") from e
            self._sleep(wait)
            wait = min(wait * 2, self._max_backoff)
        raise AssertionError("unreachable")


def _refusal(e: urllib.error.HTTPError) -> TrialError:
    try:
        body = json.loads(e.read() or b"{}")
    except (ValueError, OSError):
        body = {}
    if not isinstance(body, dict):
        body = {}
    return TrialError(e.code, str(body.get("code", "UnknownError")), str(body.get("message", e.reason)))
