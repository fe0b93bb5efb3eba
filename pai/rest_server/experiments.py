"""The experiments API (issue 29; docs/experiments.md).

Users (their tokens): ``POST /api/v2/experiments`` (a YAML or JSON document), ``GET /api/v2/experiments``,
``GET /api/v2/experiments/{user~name}``, ``PUT .../executionType {"value": "STOP"}``, and a trial's
``GET /api/v2/trials/{id}/metrics`` and ``.../checkpoints``. An experiment is read by whoever may read its owner's
jobs (``access.jobsReadableByAll``); it is stopped by its owner or an admin.

A trial's tasks (its token, ``PAI_TRIAL_TOKEN``, which grants these routes of that trial and nothing else):
``POST /api/v2/trials/{id}/metrics``, ``POST .../checkpoints``, ``GET .../checkpoints/latest`` (also with a user's
token) and ``GET .../metrics``. Another trial's token is 403; a token that is no trial's is taken as a user's.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web
from sqlalchemy.orm import Session

from pai.domain.errors import ConflictExperimentError, ForbiddenUserError, InvalidParametersError, UnauthorizedUserError
from pai.domain.experiment import ExperimentState
from pai.jobspec.experiment import ParsedExperiment, parse_experiment
from pai.jobspec.lines import located
from pai.launcher.access import may_read_jobs_of, require_reader
from pai.rest_server.bodies import json_body
from pai.rest_server.experiment_views import checkpoint_view, experiment_view, series_view
from pai.rest_server.keys import REPORTS, SERVICE
from pai.rest_server.service import Context, anonymous, credentials, reads, writes
from pai.rest_server.submit import dry_run
from pai.store import credentials as tokens
from pai.store import experiments as store
from pai.store import trial_reports
from pai.store.trial_reports import Incoming


def _checked(c: Context, s: Session, raw: bytes, content_type: str) -> tuple[ParsedExperiment, str]:
    """The document parsed and checked as a creation does, and its trials' VC."""
    classes, limits = c.launcher.submission_rules()
    parsed = parse_experiment(raw, content_type, priority_classes=classes, limits=limits)
    vc = (parsed.experiment.trial.get("defaults") or {}).get("virtualCluster") or "default"
    c.launcher.require_vc(s, c.user, vc)
    return parsed, vc


@writes(wakes=True)
def _create(c: Context, raw: bytes, content_type: str) -> dict[str, Any]:
    with c.db.session() as s, located(raw):
        parsed, vc = _checked(c, s, raw, content_type)
        try:
            row = c.launcher.experiments.create(s, c.user, parsed, vc)
        except ConflictExperimentError as e:  # the name's line, as a dry run's
            e.field = e.field or "name"
            raise
    return {"message": f"experiment {row.key} created", "experimentName": row.key}


@reads
def _dry_run(c: Context, raw: bytes, content_type: str) -> dict[str, Any]:
    """``_create``'s parsing and checks (and that the name is free), nothing stored."""
    with c.db.session() as s, located(raw):
        parsed, _ = _checked(c, s, raw, content_type)
        key = f"{c.user.name}~{parsed.experiment.name}"
        if store.experiment_exists(s, key):
            raise ConflictExperimentError(f"experiment {key} already exists", field="name")
    return {"message": f"experiment {key} would be created (dry run: nothing stored)", "experimentName": key,
            "dryRun": True}


@reads
def _list(c: Context, user: str | None) -> list[dict[str, Any]]:
    everyone = c.launcher.jobs_readable_by_all()
    with c.db.session() as s:
        rows = store.list_experiments(s, user)
        return [experiment_view(s, row, detail=False) for row in rows
                if may_read_jobs_of(c.user, row.user, everyone)]


@reads
def _detail(c: Context, key: str) -> dict[str, Any]:
    everyone = c.launcher.jobs_readable_by_all()
    with c.db.session() as s:
        row = store.get_experiment(s, key)
        require_reader(c.user, row.user, everyone)
        return experiment_view(s, row, detail=True)


@writes(wakes=True)
def _stop(c: Context, key: str) -> dict[str, Any]:
    with c.db.session() as s:
        row = c.launcher.experiments.stop(s, key, c.user)
    if ExperimentState(row.state).is_terminal():
        return {"message": f"experiment {key} has ended already ({row.state}); nothing changed"}
    return {"message": f"experiment {key} is stopping: its trials are being stopped"}


def _trial(c: Context, trial_id: int, *, trial_only: bool = False) -> store.Trial:
    """The trial, once the credentials may act on it: its own token, or (unless ``trial_only``) the token of a user
    who may read its experiment."""
    creds = c.credentials
    if creds is None:
        raise UnauthorizedUserError("Authorization: a 'Bearer <token>' header is required")
    with c.db.session() as s:
        holder = store.trial_by_token(s, tokens.token_digest(creds.token)) if creds.basic_user is None else None
        if holder is not None:
            if holder.id == trial_id:
                return holder  # a trial's own report: one query
            raise ForbiddenUserError(f"this token is trial {holder.id}'s; it grants nothing of trial {trial_id}")
        caller = c.launcher.accounts.caller(s, creds.token)
        if caller is None:
            raise UnauthorizedUserError("the token is neither a trial's nor a user's valid token")
        if trial_only:
            raise ForbiddenUserError(f"only trial {trial_id}'s own token (PAI_TRIAL_TOKEN) may report for it")
        trial = store.get_trial(s, trial_id)
        experiment = store.get_experiment_by_id(s, trial.experiment_id)
        require_reader(caller.user, experiment.user, c.launcher.jobs_readable_by_all())
        return trial


@anonymous(writes=True)
def _report(c: Context, trial_id: int, body: dict[str, Any]) -> dict[str, Any]:
    trial = _trial(c, trial_id, trial_only=True)
    metrics = body.get("metrics")
    if not isinstance(metrics, dict):
        raise InvalidParametersError("metrics: must be an object of {name: number}", field="metrics")
    with c.db.session() as s:
        answer = trial_reports.report(s, trial.id, body.get("step"), metrics, known=True)
    return {"stored": answer.stored, "stop": answer.stop}


@anonymous(writes=False)
def _series(c: Context, trial_id: int, name: str | None) -> dict[str, Any]:
    trial = _trial(c, trial_id)
    with c.db.session() as s:
        experiment = store.get_experiment_by_id(s, trial.experiment_id)
        return series_view(trial, experiment, trial_reports.series(s, trial.id, name))


@anonymous(writes=True)
def _checkpoint(c: Context, trial_id: int, body: dict[str, Any]) -> dict[str, Any] | None:
    trial = _trial(c, trial_id, trial_only=True)
    metadata = body.get("metadata") or {}
    path = body.get("path")
    if not isinstance(metadata, dict):
        raise InvalidParametersError("metadata: must be an object", field="metadata")
    if not isinstance(path, str):
        raise InvalidParametersError("path: must be a string", field="path")
    with c.db.session() as s:
        return checkpoint_view(trial_reports.add_checkpoint(s, trial.id, body.get("step"), path, metadata))


@anonymous(writes=False)
def _checkpoints(c: Context, trial_id: int, latest: bool) -> Any:
    trial = _trial(c, trial_id)
    with c.db.session() as s:
        if latest:
            return checkpoint_view(trial_reports.latest_checkpoint(s, trial.id))
        return [checkpoint_view(k) for k in trial_reports.checkpoints_of(s, trial.id)]


# ---- handlers ---------------------------------------------------------------------------------------------------

def _key(request: web.Request) -> str:
    return request.match_info["key"]


def _trial_id(request: web.Request) -> int:
    return int(request.match_info["trial"])


async def create(request: web.Request) -> web.Response:
    """``POST /api/v2/experiments``; with ``?dryRun=true`` checked only (200, nothing stored)."""
    creds, op = credentials(request), _dry_run if dry_run(request) else _create
    answer = await request.app[SERVICE](creds, op, await request.read(), request.content_type)
    return web.json_response(answer, status=200 if op is _dry_run else 202)


async def list_experiments(request: web.Request) -> web.Response:
    user = request.query.get("username") or None
    return web.json_response(await request.app[SERVICE](credentials(request), _list, user))


async def experiment_detail(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICE](credentials(request), _detail, _key(request)))


async def execution_type(request: web.Request) -> web.Response:
    creds = credentials(request)  # 401 before the body's 400, as the jobs' executionType
    body = await json_body(request, 'like {"value": "STOP"}')
    if body.get("value") != "STOP":
        raise InvalidParametersError(f"value: {body.get('value')!r} is not STOP (an experiment cannot be started "
                                     f"again; create a new one)", field="value")
    answer = await request.app[SERVICE](creds, _stop, _key(request))
    return web.json_response(answer, status=202)


async def report(request: web.Request) -> web.Response:
    """A trial's report goes with the others waiting for the writer (``pai.rest_server.reports``); one whose token
    is no trial's, or whose body does not pass, goes through the facade (its token checked first: 401, 403)."""
    creds, trial_id = credentials(request), _trial_id(request)
    body = await json_body(request, 'like {"step": 10, "metrics": {"loss": 0.25}}')
    metrics = body.get("metrics")
    if creds.basic_user is None and isinstance(metrics, dict):
        try:
            item = Incoming(tokens.token_digest(creds.token), trial_id, trial_reports.check_step(body.get("step")),
                            trial_reports.check_values(metrics), time.time())
        except InvalidParametersError:
            item = None
        outcome = None if item is None else await request.app[REPORTS].submit(item)
        if isinstance(outcome, trial_reports.ReportAnswer):
            return web.json_response({"stored": outcome.stored, "stop": outcome.stop})
        if isinstance(outcome, trial_reports.OtherTrialToken):
            raise ForbiddenUserError(f"this token is trial {outcome.args[0]}'s; it grants nothing of trial {trial_id}")
        if isinstance(outcome, Exception) and not isinstance(outcome, trial_reports.NotATrialToken):
            raise outcome
    return web.json_response(await request.app[SERVICE](creds, _report, trial_id, body))


async def metrics(request: web.Request) -> web.Response:
    name = request.query.get("name") or None
    answer = await request.app[SERVICE](credentials(request), _series, _trial_id(request), name)
    return web.json_response(answer)


async def add_checkpoint(request: web.Request) -> web.Response:
    body = await json_body(request, 'like {"step": 40, "path": "/mnt/ckpt/40.pt", "metadata": {}}')
    return web.json_response(await request.app[SERVICE](credentials(request), _checkpoint, _trial_id(request), body))


async def checkpoints(request: web.Request) -> web.Response:
    answer = await request.app[SERVICE](credentials(request), _checkpoints, _trial_id(request), False)
    return web.json_response(answer)


async def latest_checkpoint(request: web.Request) -> web.Response:
    answer = await request.app[SERVICE](credentials(request), _checkpoints, _trial_id(request), True)
    return web.json_response(answer)

