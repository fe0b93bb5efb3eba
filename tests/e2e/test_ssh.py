"""SSH into a job's tasks on a real cluster (``pai master`` and one agent on the process runtime), as a new user does
it from the docs, with the real OpenSSH client: ``pai ssh-key add`` (the key goes to the user's extension), a job
with OpenPAI's ssh plugin (jobssh), ``pai ssh JOB -- command`` through the master's tunnel, the entry ``pai ssh
--config`` prints used by plain ``ssh`` (as VS Code Remote-SSH uses it), the tasks reaching each other by name with
the job's key, the job's key downloaded from ``GET {job}/ssh``'s link; another user's job refused."""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.dbkit import database_url
from tests.e2e.harness import Cluster, cluster, wait_for
from tests.nodeagent.sshkit import require_client

BOB = ("bob", "bob-password")
JOB = """
protocolVersion: 2
name: box
type: job
prerequisites:
  - {type: dockerimage, name: img, uri: busybox}
taskRoles:
  worker:
    instances: 2
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: ['sleep 3600']
extras:
  com.microsoft.pai.runtimeplugin:
    - {plugin: ssh, parameters: {jobssh: true}}
"""


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[str, str], Path]]:
    """The cluster, bob's key added with ``pai ssh-key add``, bob's job running; bob's CLI environment, his key."""
    require_client()
    tmp = tmp_path_factory.mktemp("ssh")
    with database_url("sqlite", tmp) as url, cluster(tmp, url, [("node-a", "127.0.0.2", 4)]) as c:
        c.api.create_user({"username": BOB[0], "password": BOB[1]})
        token = MasterApi(HttpClient(c.url)).login(*BOB)["token"]
        env = {**c.env, "PAI_TOKEN": token, "PAI_USER": BOB[0], "HOME": str(tmp), "PAI_MASTER_URL": c.url}
        key = tmp / "id_bob"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bob@laptop", "-f", str(key)], check=True)
        added = pai(env, "ssh-key", "add", str(key.with_suffix(".pub")))
        assert added.returncode == 0 and "added key 'bob@laptop'" in added.stdout, added.stderr
        submitted = requests.post(f"{c.url}/api/v2/jobs", data=JOB, timeout=30, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "text/yaml"})
        assert submitted.status_code == 202, submitted.text
        detail = c.wait_state("bob~box", {"RUNNING"})
        for _, task in c.tasks(detail):  # the agent opens a task's SSH endpoint once it has seen it running
            address = (task["containerIp"], int(task["containerPorts"]["ssh"]))
            wait_for(f"ssh endpoint {address} listening", functools.partial(_accepts, address), timeout=30)
        yield c, env, key


def _accepts(address: tuple[str, int]) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(address, timeout=2):
        return True
    return False


def pai(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pai", *args], capture_output=True, env=env, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def client_options(tmp: Path, key: Path) -> list[str]:
    return ["-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
            "-o", f"UserKnownHostsFile={tmp / 'known_hosts'}"]


def test_pai_ssh_runs_a_command_in_the_task_with_the_users_key(running: tuple[Cluster, dict[str, str], Path]) -> None:
    c, env, key = running
    done = pai(env, "ssh", "box", "--index", "1", "--", *client_options(c.tmp, key),
               'echo "$PAI_CURRENT_TASK_ROLE_NAME-$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"; exit 5')
    assert (done.returncode, done.stdout) == (5, "worker-1\n"), done.stderr
    listed = pai(env, "ssh-key", "list")
    assert listed.returncode == 0 and listed.stdout.startswith("bob@laptop\tssh-ed25519 ")


def test_the_printed_config_entry_takes_plain_ssh_to_the_task(running: tuple[Cluster, dict[str, str], Path]) -> None:
    c, env, key = running
    entry = pai(env, "ssh", "box", "--config")
    assert entry.returncode == 0, entry.stderr
    assert entry.stdout.startswith("Host pai-bob-box-worker-0\n") and " --proxy" in entry.stdout
    config = c.tmp / "ssh_config"
    config.write_text(entry.stdout)
    done = subprocess.run(["ssh", "-F", str(config), *client_options(c.tmp, key), "pai-bob-box-worker-0",
                           "echo $PAI_JOB_NAME"], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout) == (0, "bob~box\n"), done.stderr


def test_tasks_reach_each_other_by_name_with_the_jobs_key(running: tuple[Cluster, dict[str, str], Path]) -> None:
    c, env, key = running
    hop = ('ssh -F "$PAI_SSH_DIR/config" -o BatchMode=yes -o LogLevel=ERROR worker-1 '
           "'echo $PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX'")
    done = pai(env, "ssh", "box", "--", *client_options(c.tmp, key), hop)
    assert (done.returncode, done.stdout) == (0, "1\n"), done.stderr


def test_the_jobs_key_from_its_ssh_info_lets_its_owner_in(running: tuple[Cluster, dict[str, str], Path]) -> None:
    c, env, _ = running
    auth = {"Authorization": f"Bearer {env['PAI_TOKEN']}"}
    info = requests.get(f"{c.url}/api/v2/jobs/bob~box/ssh", headers=auth, timeout=30).json()
    assert [x["sshIp"] for x in info["containers"]] == ["127.0.0.2", "127.0.0.2"]
    private = requests.get(info["keyPair"]["privateKeyDirectDownloadLink"], headers=auth, timeout=30)
    assert private.status_code == 200
    job_key = c.tmp / "id_job"
    job_key.write_text(private.text)
    job_key.chmod(0o600)
    done = pai(env, "ssh", "box", "--", *client_options(c.tmp, job_key), "echo in with the job key")
    assert (done.returncode, done.stdout) == (0, "in with the job key\n"), done.stderr
    admin = {"Authorization": f"Bearer {c.api.http.token}"}
    assert requests.get(info["keyPair"]["privateKeyDirectDownloadLink"], headers=admin, timeout=30).status_code == 200


def test_another_users_job_is_refused(running: tuple[Cluster, dict[str, str], Path]) -> None:
    c, env, key = running
    c.submit(json.dumps({"jobName": "admins", "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "sleep 3600"}]}))
    c.wait_state("admin~admins", {"RUNNING"})
    done = pai(env, "ssh", "admin~admins", "--", *client_options(c.tmp, key), "true")
    assert done.returncode == 255 and "ForbiddenUserError" in done.stderr, done.stderr
