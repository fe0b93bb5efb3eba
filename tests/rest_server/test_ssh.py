"""``GET {job}/ssh`` in OpenPAI's shape for a job with the ssh runtime plugin, and its key pair's files: the private
key to the owner and admins only."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import serialization

from pai.store import users
from tests.rest_server.conftest import Api
from tests.rest_server.test_nodes import heartbeat, wait_state
from tests.rest_server.test_vcs import add_node

SSH_JOB = """
protocolVersion: 2
name: NAME
type: job
prerequisites:
  - {type: dockerimage, name: img, uri: busybox}
taskRoles:
  w:
    instances: 2
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}
    commands: ['sleep 60']
"""
PLUGIN = "extras:\n  com.microsoft.pai.runtimeplugin:\n    - {plugin: ssh, parameters: {jobssh: true}}\n"


async def submit(api: Api, name: str, plugin: bool = True, token: str | None = None) -> str:
    body = SSH_JOB.replace("NAME", name) + (PLUGIN if plugin else "")
    status, answer = await api.call("POST", "/api/v2/jobs", body=body, content_type="text/yaml", token=token)
    assert status == 202, answer
    return str(answer["jobName"])


async def bob(api: Api) -> str:
    await api.write(lambda s: users.create_user(s, "bob", "bob-password"))
    token = await api.login("bob", "bob-password")
    await api.login()
    return token


async def test_the_ssh_info_of_a_running_job_names_its_tasks_endpoints_and_its_key(api: Api) -> None:
    await add_node(api, "n1")
    key = await submit(api, "s")
    detail: Any = await wait_state(api, key, "RUNNING")
    tasks = detail["taskRoles"]["w"]["taskStatuses"]
    status, info = await api.call("GET", f"/api/v2/jobs/{key}/ssh")
    assert (status, info["containers"]) == (200, [])  # placed, not started yet
    await heartbeat(api, "n1", [{"attemptId": t["containerId"], "jobKey": key, "role": "w", "index": i,
                                 "status": "running"} for i, t in enumerate(tasks)])
    status, info = await api.call("GET", f"/api/v2/jobs/{key}/ssh")
    assert info["containers"] == [{"id": t["containerId"], "sshIp": "127.0.0.9",
                                   "sshPort": str(t["containerPorts"]["ssh"])} for t in tasks]
    base = str(api.client.make_url(f"/api/v2/jobs/{key}/ssh"))
    assert info["keyPair"] == {"folderPath": base, "publicKeyFileName": "id_rsa.pub", "privateKeyFileName": "id_rsa",
                               "privateKeyDirectDownloadLink": f"{base}/id_rsa"}
    resp = await api.client.session.get(info["keyPair"]["privateKeyDirectDownloadLink"], headers=api.headers())
    assert resp.status == 200 and resp.headers["Cache-Control"] == "no-store"
    private = serialization.load_ssh_private_key((await resp.read()), None)
    status, public = await api.call("GET", f"/api/v2/jobs/{key}/ssh/id_rsa.pub")
    assert status == 200
    loaded = serialization.load_ssh_public_key(public.strip().encode())
    assert private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) \
        == loaded.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)


async def test_only_the_owner_and_admins_download_the_private_key(api: Api) -> None:
    bob_token = await bob(api)
    key = await submit(api, "mine", token=bob_token)
    status, body = await api.call("GET", f"/api/v2/jobs/{key}/ssh/id_rsa", token=bob_token)
    assert status == 200 and "OPENSSH PRIVATE KEY" in body
    status, body = await api.call("GET", f"/api/v2/jobs/{key}/ssh/id_rsa")  # admin
    assert status == 200 and "OPENSSH PRIVATE KEY" in body
    admins = await submit(api, "admins")
    status, body = await api.call("GET", f"/api/v2/jobs/{admins}/ssh/id_rsa", token=bob_token)
    assert (status, body["code"]) == (403, "ForbiddenUserError")
    status, body = await api.call("GET", f"/api/v2/jobs/{admins}/ssh", token=bob_token)  # readers see the info
    assert status == 200 and body["containers"] == []


async def test_a_job_without_the_plugin_has_no_ssh_info_and_says_how_to_get_in(api: Api) -> None:
    key = await submit(api, "plain", plugin=False)
    for path in ("ssh", "ssh/id_rsa", "ssh/id_rsa.pub"):
        status, body = await api.call("GET", f"/api/v2/jobs/{key}/{path}")
        assert (status, body["code"]) == (404, "NoJobSshInfoError") and f"pai ssh {key}" in body["message"]
    status, body = await api.call("GET", "/api/v2/jobs/admin~none/ssh")
    assert (status, body["code"]) == (404, "NoJobError")
