"""pai_trial: what a trial of a pai experiment imports to read its hyperparameters, report its metrics, learn that
the searcher stopped it, and record and find its checkpoints. Standard library only (it runs in any image).

    import pai_trial

    hp = pai_trial.hparams()                      # {"lr": 0.01, "layers": 2, ...}
    start = pai_trial.latest_checkpoint()         # None, or {"step": 40, "path": "...", "metadata": {...}}
    for step in range(0 if start is None else start["step"] + 1, 100):
        loss = train_one_step(hp)
        pai_trial.report(step, {"loss": loss})    # idempotent per step: a resumed trial continues its curve
        if step % 10 == 0:
            pai_trial.checkpoint(step, save(step), {"epoch": step // 10})
        if pai_trial.should_stop():               # the searcher pruned this trial: end now, as STOPPED
            break

Environment (set by pai in every task of a trial): ``PAI_TRIAL_ID``, ``PAI_TRIAL_TOKEN`` (the trial's own token:
it grants these routes of this trial and nothing else), ``PAI_MASTER_URL`` (``http://host:port``) and
``PAI_TRIAL_HPARAMS`` (the hyperparameters, a JSON object). ``hparams()`` needs only the last.

Wire format (every request carries ``Authorization: Bearer $PAI_TRIAL_TOKEN``; bodies are JSON):

``POST /api/v2/trials/{id}/metrics``  ``{"step": 12, "metrics": {"loss": 0.25, "acc": 0.91}}``
    200 ``{"stored": 2, "stop": false}``: ``stored`` counts the values this report added; a (step, name) reported
    before keeps its first value and adds nothing, so reporting a step again is safe. ``stop``: the searcher (or
    the user, stopping the experiment) wants the trial to end; ``should_stop()`` answers it.
    400 ``InvalidParametersError``: a value that is not a finite number (refused here first, with a ValueError), or
    the trial's stored values reached their documented cap. 403: the token is not this trial's.
``POST /api/v2/trials/{id}/checkpoints``  ``{"step": 40, "path": "/mnt/ckpt/trial-3/40.pt", "metadata": {...}}``
    200 ``{"step": 40, "path": "...", "metadata": {...}}``; the same step again replaces its checkpoint.
``GET /api/v2/trials/{id}/checkpoints/latest``
    200: the checkpoint of the highest step (as above), or ``null`` when there is none.
Errors are ``{"code": ..., "message": ...}``. Connection errors and 502/503/504 (a master restarting) are retried
with exponential backoff (0.5 s doubling to 15 s, 12 attempts, about two minutes), then MasterUnreachableError;
any other error answer raises TrialError (``status``, ``code``, ``message``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from pai_trial.client import MasterUnreachableError, TrialClient, TrialError, check_metrics, check_step

__all__ = [
    "MasterUnreachableError",
    "TrialClient",
    "TrialError",
    "check_metrics",
    "check_step",
    "checkpoint",
    "client",
    "hparams",
    "latest_checkpoint",
    "report",
    "should_stop",
]

ID_ENV, TOKEN_ENV, MASTER_ENV, HPARAMS_ENV = "PAI_TRIAL_ID", "PAI_TRIAL_TOKEN", "PAI_MASTER_URL", "PAI_TRIAL_HPARAMS"

_client: TrialClient | None = None


def hparams() -> dict[str, Any]:
    """This trial's hyperparameters (``$PAI_TRIAL_HPARAMS``); {} when it is not set."""
    raw = os.environ.get(HPARAMS_ENV, "")
    if not raw:
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"{HPARAMS_ENV} must hold a JSON object, not {raw[:80]!r}")
    return value


def client() -> TrialClient:
    """The trial's client, made from the environment at the first call; RuntimeError outside a pai trial."""
    global _client
    if _client is None:
        missing = [name for name in (ID_ENV, TOKEN_ENV, MASTER_ENV) if not os.environ.get(name)]
        if missing:
            raise RuntimeError(f"not in a pai trial: {', '.join(missing)} not set")
        _client = TrialClient(os.environ[ID_ENV], os.environ[TOKEN_ENV], os.environ[MASTER_ENV], hparams())
    return _client


def report(step: int, metrics: Mapping[str, object]) -> bool:
    """Report ``metrics`` ({name: number}) at ``step``; whether the trial should stop. ValueError for NaN, inf or a
    non-number (nothing is sent)."""
    return client().report(step, metrics)


def should_stop() -> bool:
    """Whether the last report's answer asked the trial to stop (False before the first report)."""
    return client().should_stop()


def checkpoint(step: int, path: str, metadata: Mapping[str, Any] | None = None) -> None:
    """Record the checkpoint the trial wrote at ``path`` for ``step``, with ``metadata`` of its own."""
    client().checkpoint(step, path, metadata)


def latest_checkpoint() -> dict[str, Any] | None:
    """The checkpoint of the highest step recorded (``{"step", "path", "metadata"}``), None when there is none."""
    return client().latest_checkpoint()
