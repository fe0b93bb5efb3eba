"""``GET {job}/ssh``: OpenPAI's SSH info of a job with the ``ssh`` runtime plugin, and its key pair's files.

The answer has OpenPAI's shape (its YARN-era REST server's, which its clients read): ``containers`` (every running
task: its attempt id, the node's address and the task's ``ssh`` port, where the node agent serves its SSH endpoint)
and ``keyPair`` (the job's key pair: ``privateKeyDirectDownloadLink`` is this API's ``{job}/ssh/id_rsa``, which
serves the private key to the job's owner and admins only; ``id_rsa.pub`` to whoever may read the job). A job without
the plugin has no key pair: NoJobSshInfoError, as OpenPAI answers (its owner's own keys let them in: ``pai ssh``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pai.domain.job import Job
from pai.domain.states import TaskState
from pai.launcher import sshaccess
from pai.launcher.access import owner_of, require_owner_or_admin
from pai.rest_server.jobs import key_of, reader
from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, credentials, reads

PRIVATE, PUBLIC = "id_rsa", "id_rsa.pub"


@reads
def _plugin_job(c: Context, key: str) -> Job:
    reader(c, [owner_of(key)])
    return sshaccess.plugin_job(c.db, key)


@reads
def _private_key(c: Context, key: str) -> str:
    reader(c, [owner_of(key)])
    require_owner_or_admin(c.user, owner_of(key), "download the SSH private key of")
    return sshaccess.private_key(c.db, key)


def _base(request: web.Request) -> str:
    """The API's base URL as the client reached it (with a prefix before ``/api/``, e.g. ``/rest-server``)."""
    path = request.path
    prefix = path[:path.index("/api/")] if "/api/" in path else ""
    return f"{request.url.origin()}{prefix}"


def ssh_view(job: Job, base: str) -> dict[str, Any]:
    folder = f"{base}/api/v2/jobs/{job.key}/ssh"
    containers = [{"id": t.attempt_id, "sshIp": t.address, "sshPort": str(t.ports[sshaccess.SSH_LABEL][0])}
                  for t in job.tasks
                  if t.state is TaskState.RUNNING and t.address and t.attempt_id and t.ports.get(sshaccess.SSH_LABEL)]
    return {"containers": containers,
            "keyPair": {"folderPath": folder, "publicKeyFileName": PUBLIC, "privateKeyFileName": PRIVATE,
                        "privateKeyDirectDownloadLink": f"{folder}/{PRIVATE}"}}


async def ssh_info(request: web.Request) -> web.Response:
    job = await request.app[SERVICE](credentials(request), _plugin_job, key_of(request))
    return web.json_response(ssh_view(job, _base(request)))


async def private_key(request: web.Request) -> web.Response:
    """``GET {job}/ssh/id_rsa``: the job's private key, to its owner and admins (403 ForbiddenUserError for others)."""
    key = key_of(request)
    text = await request.app[SERVICE](credentials(request), _private_key, key)
    return _key_file(text, PRIVATE)


async def public_key(request: web.Request) -> web.Response:
    """``GET {job}/ssh/id_rsa.pub``: the job's public key, to whoever may read the job."""
    job = await request.app[SERVICE](credentials(request), _plugin_job, key_of(request))
    return _key_file(job.spec.ssh_public_key + "\n", PUBLIC)


def _key_file(text: str, name: str) -> web.Response:
    return web.Response(text=text, content_type="text/plain", headers={
        "Content-Disposition": f'attachment; filename="{name}"', "Cache-Control": "no-store"})
