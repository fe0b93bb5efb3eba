"""A v2 job whose secrets reach every place of its row (text, spec, rendered command, image auth), and a dump of every
row of every table to look for them in."""

from __future__ import annotations

import uuid

from sqlalchemy import inspect, text

from pai.domain.job import Job, initial_tasks
from pai.jobspec import parse_job
from pai.store.db import Database

TOKEN, PASSWORD = "tok-5e3c7e7-value", "pw-9a1b2c3-value"
SECRET_VALUES = (TOKEN, PASSWORD)

SECRET_JOB = """
protocolVersion: 2
name: JOB_NAME
type: job
prerequisites:
  - type: dockerimage
    name: img
    uri: registry.example:5000/train
    auth: {username: bot, password: "<% $secrets.pw %>", registryuri: registry.example:5000}
secrets:
  token: TOKEN_VALUE
  pw: PASSWORD_VALUE
taskRoles:
  worker:
    instances: 2
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: ["echo <% $secrets.token %>", "python train.py"]
"""


def secret_job(name: str = "secret", user: str = "alice") -> tuple[Job, str]:
    """A job as the master stores it at submission, and its submitted text."""
    body = SECRET_JOB.replace("JOB_NAME", name).replace("TOKEN_VALUE", TOKEN).replace("PASSWORD_VALUE", PASSWORD)
    spec = parse_job(body).spec
    return Job(id=str(uuid.uuid4()), user=user, spec=spec, submitted_at=1000.0, tasks=initial_tasks(spec)), body


def dump(db: Database) -> str:
    """Every row of every table (the keyword index's included), as text."""
    with db.engine.connect() as c:
        names = inspect(c).get_table_names()
        return "\n".join(repr(tuple(row)) for name in names for row in c.execute(text(f'SELECT * FROM "{name}"')))
