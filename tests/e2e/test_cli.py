"""The `pai` CLI against a real master and agents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import ADMIN_PASSWORD, Cluster, cluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def one_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("cli")
    with cluster(tmp, None, [("node-a", "127.0.0.2", 4)]) as c:
        yield c


def pai(c: Cluster, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PAI_MASTER_URL": c.url}
    env.pop("PAI_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "pai", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)


def test_login_submit_wait_show_logs_and_errors(one_agent: Cluster, tmp_path: Path) -> None:
    c = one_agent
    r = pai(c, "login", "--master", c.url, "--user", "admin", "--password", ADMIN_PASSWORD, home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / ".config" / "pai" / "config.json").stat().st_mode & 0o777 == 0o600

    r = pai(c, "submit", "examples/hello-v2.yaml", "--wait", "--interval", "0.3", home=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "admin~hello-v2" in r.stdout and "SUCCEEDED" in r.stdout

    r = pai(c, "jobs", "-o", "json", home=tmp_path)
    assert [j["name"] for j in json.loads(r.stdout)] == ["hello-v2"]
    r = pai(c, "job", "show", "hello-v2", home=tmp_path)
    assert r.returncode == 0 and "SUCCEEDED" in r.stdout and "worker" in r.stdout
    r = pai(c, "logs", "hello-v2", "--role", "worker", "--index", "1", home=tmp_path)
    assert "role=worker index=1 workers=127.0.0.2:" in r.stdout
    r = pai(c, "stop", "hello-v2", home=tmp_path)
    assert r.returncode == 0 and "job admin~hello-v2 has already ended (SUCCEEDED): nothing to stop" in r.stdout
    r = pai(c, "nodes", home=tmp_path)
    assert "node-a" in r.stdout and "READY" in r.stdout

    r = pai(c, "submit", "examples/hello-v2.yaml", home=tmp_path)
    assert r.returncode == 1 and "ConflictJobError" in r.stderr and "Traceback" not in r.stderr
    r = pai(c, "job", "show", "missing", home=tmp_path)
    assert r.returncode == 1 and "NoJobError" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"jobName": "bad name!", "image": "x", "taskRoles": []}))
    r = pai(c, "submit", str(bad), home=tmp_path)
    assert r.returncode == 1 and "InvalidProtocolError" in r.stderr


def test_stop_from_the_cli(one_agent: Cluster, tmp_path: Path) -> None:
    c = one_agent
    pai(c, "login", "--master", c.url, "--user", "admin", "--password", ADMIN_PASSWORD, home=tmp_path)
    spec = tmp_path / "sleep.json"
    spec.write_text(json.dumps({"jobName": "sleeper", "image": "busybox", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "sleep 600"}]}))
    assert pai(c, "submit", str(spec), home=tmp_path).returncode == 0
    r = pai(c, "stop", "sleeper", home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert c.wait_state("admin~sleeper", {"STOPPED"}, 10)["jobStatus"]["state"] == "STOPPED"


def test_a_job_no_node_could_hold_is_submitted_with_a_warning_on_stderr(one_agent: Cluster, tmp_path: Path) -> None:
    c = one_agent
    pai(c, "login", "--master", c.url, "--user", "admin", "--password", ADMIN_PASSWORD, home=tmp_path)
    spec = tmp_path / "huge.yaml"
    spec.write_text("protocolVersion: 2\nname: huge\ntype: job\n"
                    "prerequisites: [{type: dockerimage, name: img, uri: busybox}]\n"
                    "taskRoles:\n  worker:\n    dockerImage: img\n    commands: ['true']\n"
                    "    resourcePerInstance: {gpu: 0, cpu: 64, memoryMB: 256}\n")
    r = pai(c, "submit", str(spec), home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "admin~huge"
    assert r.stderr == ("warning: taskRoles.worker.resourcePerInstance.cpu: asks 64 CPUs per instance; the largest "
                        "node, node-a, has 4\n")
    assert pai(c, "stop", "huge", home=tmp_path).returncode == 0  # it would wait for ever


def test_a_code_dir_with_dotdot_gets_the_same_400_from_the_cli_and_from_rest(one_agent: Cluster,
                                                                            tmp_path: Path) -> None:
    c = one_agent
    pai(c, "login", "--master", c.url, "--user", "admin", "--password", ADMIN_PASSWORD, home=tmp_path)
    spec = {"jobName": "escape", "image": "busybox", "codeDir": "../code", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "true"}]}
    status, body = c.raw("POST", "/api/v2/jobs", json.dumps(spec).encode(), "application/json")
    assert status == 400 and body["code"] == "InvalidProtocolError"
    assert body["message"] == "codeDir: '../code': '..' is not allowed"
    (tmp_path / "job.json").write_text(json.dumps(spec))
    r = pai(c, "submit", str(tmp_path / "job.json"), home=tmp_path)
    assert r.returncode == 1 and f"InvalidProtocolError: {body['message']}" in r.stderr, r.stderr
    assert c.raw("GET", "/api/v2/jobs/admin~escape")[0] == 404  # nothing was stored


def test_vc_list_and_cordon(one_agent: Cluster, tmp_path: Path) -> None:
    c = one_agent
    pai(c, "login", "--master", c.url, "--user", "admin", "--password", ADMIN_PASSWORD, home=tmp_path)
    r = pai(c, "vc", "list", home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "default" in r.stdout and "100.0%" in r.stdout
    r = pai(c, "vc", "list", "-o", "json", home=tmp_path)
    assert json.loads(r.stdout)["default"]["resourcesTotal"]["cpu"] == 4
    r = pai(c, "cordon", "node-a", home=tmp_path)
    assert r.returncode == 0 and "CORDONED" in r.stdout
    assert "CORDONED" in pai(c, "nodes", home=tmp_path).stdout
    r = pai(c, "uncordon", "node-a", home=tmp_path)
    assert r.returncode == 0 and "READY" in r.stdout
    r = pai(c, "cordon", "no-such-node", home=tmp_path)
    assert r.returncode == 1 and "NoNodeError" in r.stderr


def test_vc_simulate_prints_the_decision(tmp_path: Path) -> None:
    scenario = {
        "nodes": [{"name": "n1", "gpu": 8, "cpu": 32, "memoryMB": 65536}],
        "vcs": [{"name": "a", "guaranteed": {"gpu": 4}}, {"name": "b", "guaranteed": {"gpu": 4}}],
        "running": [{"name": "a-big", "vc": "a", "priority": 10, "startedAt": 0,
                     "tasks": [{"gpu": 8, "cpu": 1, "memoryMB": 1, "node": "n1"}]}],
        "pending": [{"name": "b-job", "vc": "b", "priority": 10, "submittedAt": 1, "tasks": [{"gpu": 4}]},
                    {"name": "huge", "vc": "a", "priority": 10, "submittedAt": 2, "tasks": [{"gpu": 16}]}],
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(json.dumps(scenario))
    r = subprocess.run([sys.executable, "-m", "pai", "vc", "simulate", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["preempted"] == ["a-big"]
    assert list(out["admitted"]) == ["b-job"] and list(out["admitted"]["b-job"].values()) == ["n1"]
    assert "huge" in out["waiting"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [unclosed")
    r = subprocess.run([sys.executable, "-m", "pai", "vc", "simulate", str(bad)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize(("content", "named"), [
    pytest.param("{}", "nodes: is required", id="empty-mapping"),
    pytest.param((ROOT / "examples" / "hello-v1.json").read_text(), "jobName: additional property is not allowed",
                 id="a-job-spec"),
])
def test_vc_simulate_refuses_what_is_not_a_scenario(tmp_path: Path, content: str, named: str) -> None:
    path = tmp_path / "not-a-scenario.json"
    path.write_text(content)
    r = subprocess.run([sys.executable, "-m", "pai", "vc", "simulate", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stdout) == (1, "")
    assert f"{path}: not a valid scenario" in r.stderr and named in r.stderr, r.stderr


def test_users_and_groups_from_the_cli(one_agent: Cluster, tmp_path: Path) -> None:
    c = one_agent
    admin, bob = tmp_path / "admin", tmp_path / "bob"
    pai(c, "login", "--master", c.url, "--user", "admin", "--password", ADMIN_PASSWORD, home=admin)
    r = pai(c, "user", "create", "bob", "--password", "bob-secret", "--email", "bob@example.com", home=admin)
    assert (r.returncode, r.stdout.strip()) == (0, "user bob created"), r.stderr
    r = pai(c, "group", "create", "team", "--vc", "default", "--storage", "nfs", "--description", "T", home=admin)
    assert r.returncode == 0, r.stderr
    assert pai(c, "user", "join", "bob", "team", home=admin).returncode == 0
    r = pai(c, "user", "list", "-o", "json", home=admin)
    assert {u["username"]: u["grouplist"] for u in json.loads(r.stdout)}["bob"] == ["default", "team"]
    r = pai(c, "group", "show", "team", home=admin)
    assert "VCs default; storages nfs" in r.stdout and "members: bob" in r.stdout, r.stdout + r.stderr

    pai(c, "login", "--master", c.url, "--user", "bob", "--password", "bob-secret", home=bob)
    r = pai(c, "user", "create", "eve", "--password", "eve-secret", home=bob)
    assert r.returncode == 1 and "ForbiddenUserError" in r.stderr and "Traceback" not in r.stderr
    r = pai(c, "user", "passwd", "--old-password", "bob-secret", "--new-password", "bob-secret-2", home=bob)
    assert r.returncode == 0, r.stderr
    r = pai(c, "user", "show", "bob", home=bob)
    assert r.returncode == 1 and "UnauthorizedUserError" in r.stderr  # a new password ends the old logins

    r = pai(c, "user", "set", "bob", "--admin", home=admin)
    assert r.returncode == 0, r.stderr
    assert json.loads(pai(c, "user", "show", "bob", "-o", "json", home=admin).stdout)["admin"] is True
    r = pai(c, "user", "delete", "bob", home=admin)
    assert r.returncode == 1 and "RemoveAdminError" in r.stderr
    pai(c, "user", "set", "bob", "--no-admin", home=admin)
    assert pai(c, "group", "delete", "team", home=admin).returncode == 0
    assert pai(c, "user", "delete", "bob", home=admin).returncode == 0
    assert [u["username"] for u in json.loads(pai(c, "user", "list", "-o", "json", home=admin).stdout)] == ["admin"]
