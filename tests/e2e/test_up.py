"""The README's first command: ``pai up --run examples/hello-v1.json`` on an embedded cluster."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai.cli.errors import ApiError
from pai.cli.http import HttpClient
from tests.e2e.harness import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_pai_up_runs_the_hello_example_to_succeeded_and_leaves_no_process(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "PAI_DATA_DIR": str(tmp_path / "unused")}
    proc = subprocess.run([sys.executable, "-m", "pai", "up", "--run", str(ROOT / "examples" / "hello-v1.json"),
                           "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "admin~hello-v1: SUCCEEDED" in out
    for line in ("role=ps index=0 workers=", "role=worker index=0 workers=", "role=worker index=1 workers="):
        assert line in out, out
    # Everything the command started is gone: no master or agent still holds the data directory.
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path / "data")], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""


def test_pai_up_runs_the_example_experiment_to_the_end(tmp_path: Path) -> None:
    """``pai up --run examples/experiment.yaml``: the search runs on the embedded cluster until it completes; ASHA
    stops some trials early; the trials' table is printed, its best trial marked."""
    env = {**os.environ, "HOME": str(tmp_path), "PAI_DATA_DIR": str(tmp_path / "unused")}
    proc = subprocess.run([sys.executable, "-m", "pai", "up", "--run", str(ROOT / "examples" / "experiment.yaml"),
                           "--data-dir", str(tmp_path / "data"), "--runtime", "process"],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "created experiment admin~lr-search" in out and out.rstrip().endswith("admin~lr-search: COMPLETED")
    assert "trial 15 COMPLETED" in out or "trial 15 STOPPED (searcher)" in out
    assert "STOPPED (searcher)" in out  # ASHA stopped the poor trials early
    assert "* best: trial" in out


def test_pai_up_lets_a_job_read_the_code_next_to_its_spec_file(tmp_path: Path) -> None:
    """The --run file's directory is one of the cluster's localPaths roots (the current directory another): a
    relative codeDir, which the CLI resolves next to the spec file, is allowed."""
    (tmp_path / "project" / "src").mkdir(parents=True)
    (tmp_path / "project" / "src" / "main.sh").write_text("echo code next to the spec\n")
    spec = tmp_path / "project" / "job.json"
    spec.write_text('{"jobName": "nextdoor", "image": "busybox", "codeDir": "src", "taskRoles": [{"name": "w", '
                    '"taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "sh main.sh"}]}')
    (tmp_path / "elsewhere").mkdir()
    env = {**os.environ, "HOME": str(tmp_path), "PAI_DATA_DIR": str(tmp_path / "unused")}
    proc = subprocess.run([sys.executable, "-m", "pai", "up", "--run", str(spec), "--data-dir", str(tmp_path / "data"),
                           "--runtime", "process"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path / "elsewhere")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "code next to the spec" in proc.stdout and "admin~nextdoor: SUCCEEDED" in proc.stdout
    assert '"localPaths"' in (tmp_path / "data" / "up-cluster.json").read_text()



def test_pai_up_with_a_refused_spec_says_why_in_one_line_and_leaves_no_process(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("protocolVersion: 2\nname: bad\ntype: job\n"
                    "prerequisites: [{name: img, type: dockerimage, uri: busybox}]\n"
                    "taskRoles: {w: {dockerImage: img, commands: [ls],\n"
                    "                resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}}}\n"
                    "extras: {storages: [{name: nope}]}\n")
    env = {**os.environ, "HOME": str(tmp_path), "PAI_DATA_DIR": str(tmp_path / "unused")}
    proc = subprocess.run([sys.executable, "-m", "pai", "up", "--run", str(spec), "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "error: InvalidParametersError: extras.storages[0].name: 'nope' is not a storage" in proc.stderr
    assert "Traceback" not in proc.stderr
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path / "data")], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""

def _pai(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PAI_DATA_DIR": str(home / "unused")}
    return subprocess.run([sys.executable, "-m", "pai", *args], capture_output=True, text=True, timeout=60, env=env,
                          cwd=home)


@pytest.fixture
def running_master(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    port, data = free_port(), tmp_path / "first"
    proc = subprocess.Popen([sys.executable, "-m", "pai", "master", "--port", str(port), "--data-dir", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("the first master", lambda: HttpClient(f"http://127.0.0.1:{port}").json("GET", "/healthz"))
        yield port, data
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.parametrize("run", [False, True], ids=["up", "up-run"])
def test_pai_up_on_a_port_held_by_a_pai_master_names_it_and_its_data_directory(
        running_master: tuple[int, Path], tmp_path: Path, run: bool) -> None:
    port, data = running_master
    extra = ["--run", str(ROOT / "examples" / "hello-v1.json")] if run else []
    r = _pai("up", "--port", str(port), "--data-dir", str(tmp_path / "second"), *extra, home=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert (f"port {port} is taken by a pai master that is already running at http://127.0.0.1:{port} "
            f"(data directory {data})") in r.stderr
    assert not (tmp_path / "second").exists()  # nothing was started or written


def test_pai_up_and_pai_master_on_a_port_held_by_another_program(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        r = _pai("up", "--port", str(port), "--data-dir", str(tmp_path / "d"), home=tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"port {port} on 127.0.0.1 is in use by another program" in r.stderr
        r = _pai("master", "--port", str(port), "--data-dir", str(tmp_path / "m"), home=tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"port {port} on 127.0.0.1 is already in use" in r.stderr


def test_pai_master_max_body_mb_sets_the_request_limit(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pai", "master", "--port", str(port), "--data-dir",
                             str(tmp_path / "m"), "--max-body-mb", "1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        http = HttpClient(f"http://127.0.0.1:{port}")
        wait_for("the master", lambda: http.json("GET", "/healthz"))
        try:
            big = b"x" * (1536 * 1024)
            http.request("POST", "/api/v2/authn/basic/login", body=big, content_type="application/json")
        except ApiError as e:
            assert (e.status, e.code) == (413, "RequestTooLargeError")
            assert "1048576 bytes (pai master --max-body-mb)" in e.message
        else:
            raise AssertionError("a body over --max-body-mb was accepted")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
