"""What a start command says of SSH (pai.launcher.sshaccess): the owner's keys for every task, the job's key pair for
a job with OpenPAI's ssh plugin (made at submission, sealed), the role's userssh keys, and the ~/.ssh layout's peers
for a role with jobssh."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pai.domain.resources import Resources
from pai.jobspec import parse_job
from pai.launcher.service import Launcher, LauncherConfig
from pai.launcher.sshaccess import new_key_pair
from pai.protocol import SshHost, StartTask
from pai.protocol.messages import HeartbeatRequest, NodeInfo, RegisterRequest
from pai.store import jobs
from pai.store import users as store_users
from pai.store.db import Database
from tests.launcher.builders import Clock, user
from tests.store.secretjobs import dump

OWNER_KEY = new_key_pair("alice@laptop")[1]
OTHER_KEY = new_key_pair("alice@desktop")[1]
USERSSH_KEY = new_key_pair("userssh")[1]

JOB = """
protocolVersion: 2
name: NAME
type: job
prerequisites:
  - {type: dockerimage, name: img, uri: busybox}
taskRoles:
  master:
    instances: 1
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: [sleep 60]
  worker:
    instances: 2
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: [sleep 60]
"""
PLUGIN = """
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: ssh
      taskroles: [worker]
      parameters:
        jobssh: true
        userssh: {type: custom, value: "USERSSH"}
"""


def started(db: Database, text: str) -> dict[str, StartTask]:
    """Submit ``text`` as alice (whose extension holds two keys and a line that is none) on one node; its start
    commands by ``role-index``."""
    with db.session() as s:
        store_users.create_user(s, "alice", "secret-pw", extension={"sshKeys": [
            {"title": "laptop", "value": OWNER_KEY, "time": 1}, {"title": "bad", "value": "not a key", "time": 2},
            {"title": "desktop", "value": OTHER_KEY, "time": 3}]})
    launcher = Launcher(db, LauncherConfig(), clock=Clock(1000.0))
    launcher.register(RegisterRequest(NodeInfo("n1", "127.0.0.5", Resources(0, 8, 4096))))
    launcher.submit(user("alice"), parse_job(text.encode(), "text/yaml").spec, text)
    launcher.schedule_pass()
    commands = launcher.heartbeat(HeartbeatRequest("n1")).commands
    return {f"{c.role}-{c.index}": c for c in commands if isinstance(c, StartTask)}


def test_every_task_lets_its_owner_in_with_the_keys_of_their_extension(db: Database) -> None:
    starts = started(db, JOB.replace("NAME", "plain"))
    assert len(starts) == 3
    for start in starts.values():
        assert start.ssh is not None
        assert start.ssh.authorized_keys == (OWNER_KEY, OTHER_KEY)
        assert (start.ssh.job_private_key, start.ssh.job_public_key, start.ssh.hosts) == ("", "", ())
    with db.session() as s:
        assert jobs.get_job(s, "alice~plain").spec.ssh_public_key == ""


def test_a_job_with_the_ssh_plugin_gets_a_sealed_key_pair_and_jobssh_roles_the_layout(db: Database) -> None:
    starts = started(db, JOB.replace("NAME", "ssh") + PLUGIN.replace("USERSSH", USERSSH_KEY))
    with db.session() as s:
        stored = jobs.get_job(s, "alice~ssh").spec
    assert stored.ssh_public_key.startswith("ssh-ed25519 ") and stored.ssh_private_key == ""
    worker = starts["worker-1"].ssh
    assert worker is not None
    assert worker.authorized_keys == (OWNER_KEY, OTHER_KEY, stored.ssh_public_key, USERSSH_KEY)
    assert worker.job_public_key == stored.ssh_public_key
    private = serialization.load_ssh_private_key(worker.job_private_key.encode(), None)
    assert isinstance(private, Ed25519PrivateKey)
    public = serialization.load_ssh_public_key(stored.ssh_public_key.encode())
    assert isinstance(public, Ed25519PublicKey) and private.public_key() == public
    assert worker.job_private_key.split("\n")[1] not in dump(db)  # sealed in the store
    assert [h.name for h in worker.hosts] == ["master-0", "worker-0", "worker-1"]
    for name, start in starts.items():
        assert SshHost(name, "127.0.0.5", start.ports["ssh"][0]) in worker.hosts
    master = starts["master-0"].ssh  # the plugin is the worker role's only: the job's key is trusted, no layout
    assert master is not None
    assert master.authorized_keys == (OWNER_KEY, OTHER_KEY, stored.ssh_public_key)
    assert (master.job_private_key, master.job_public_key, master.hosts) == ("", "", ())
