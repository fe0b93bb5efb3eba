"""A trial's task imports the agent's copy of pai_trial and finds the master (issue 29), with the process runtime."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import pai_trial
from pai.nodeagent import triallib
from pai.nodeagent.process_runtime import ProcessRuntime
from pai.nodeagent.taskexec import ExecRequest
from pai.nodeagent.triallib import TrialLib
from pai.protocol import ContainerStatus
from tests.nodeagent.builders import start_task, wait_status
from tests.nodeagent.conftest import Groups
from tests.nodeagent.execkit import collect

SHOW = "import os, pai_trial; print(pai_trial.__file__); print(os.environ.get('PYTHONPATH'))"
TRIAL = {"PAI_TRIAL_ID": "t-7", "PAI_TRIAL_TOKEN": "tok", "PAI_TRIAL_HPARAMS": '{"lr": 0.1}'}


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[ProcessRuntime]:
    rt = await ProcessRuntime.open(tmp_path / "state", trial_lib=TrialLib(tmp_path / "agent" / "python"))
    yield rt
    await rt.close()


async def run(runtime: ProcessRuntime, workdir: Path, code: str, env: dict[str, str]) -> list[str]:
    await runtime.start(start_task(workdir.name, f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}", env=env),
                        workdir)
    report = await wait_status(runtime, workdir.name, ContainerStatus.EXITED)
    assert report.exit_code == 0, (workdir / "stderr.log").read_text()
    return (workdir / "stdout.log").read_text().splitlines()


def test_the_copy_holds_only_pai_trials_sources_and_is_written_once(tmp_path: Path) -> None:
    root = tmp_path / "python"
    first = triallib.install(root)
    source = Path(pai_trial.__file__).parent
    copied = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert copied == sorted(f"pai_trial/{p.name}" for p in source.glob("*.py"))
    assert (first / "pai_trial" / "client.py").read_bytes() == (source / "client.py").read_bytes()
    assert [p.name for p in root.iterdir()] == [first.name]  # no temporary directory left
    assert oct(first.stat().st_mode & 0o777) == oct(0o755)  # readable by a container's user other than root
    before = (first / "pai_trial" / "__init__.py").stat().st_mtime_ns
    assert triallib.install(root) == first
    assert (first / "pai_trial" / "__init__.py").stat().st_mtime_ns == before


def test_a_half_copy_left_by_a_dead_agent_is_replaced(tmp_path: Path) -> None:
    root = tmp_path / "python"
    (root / ".tmp-dead" / "pai_trial").mkdir(parents=True)
    target = triallib.install(root)
    assert [p.name for p in root.iterdir()] == [target.name]


def test_the_master_url_is_added_unless_the_master_set_one() -> None:
    cmd = start_task("a1", env={"FOO": "1"})
    assert triallib.with_master_url(cmd, "http://m:9186").env == {"FOO": "1", "PAI_MASTER_URL": "http://m:9186"}
    assert cmd.env == {"FOO": "1"}  # the command itself is left alone
    own = start_task("a1", env={"PAI_MASTER_URL": "http://other"})
    assert triallib.with_master_url(own, "http://m:9186").env == {"PAI_MASTER_URL": "http://other"}


async def test_a_trial_task_imports_the_agents_copy(runtime: ProcessRuntime, tmp_path: Path) -> None:
    where, path = await run(runtime, tmp_path / "a1", SHOW, TRIAL)
    copy = next((tmp_path / "agent" / "python").iterdir())
    assert where == str(copy / "pai_trial" / "__init__.py")
    assert path == str(copy)


async def test_the_jobs_pythonpath_follows_ours(runtime: ProcessRuntime, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    (mine / "mymod").mkdir(parents=True)
    (mine / "mymod" / "__init__.py").write_text("X = 42\n")
    code = SHOW + "; import mymod; print(mymod.X)"
    where, path, x = await run(runtime, tmp_path / "a1", code, TRIAL | {"PYTHONPATH": str(mine)})
    copy = next((tmp_path / "agent" / "python").iterdir())
    assert where.startswith(str(copy))
    assert (path, x) == (f"{copy}{os.pathsep}{mine}", "42")


async def test_a_task_of_no_trial_gets_no_pai_trial_directory(runtime: ProcessRuntime, tmp_path: Path) -> None:
    code = "import os; print(os.environ.get('PYTHONPATH'))"
    assert await run(runtime, tmp_path / "a1", code, {}) == ["None"]
    assert await run(runtime, tmp_path / "a2", code, {"PYTHONPATH": "/job/lib"}) == ["/job/lib"]
    assert not (tmp_path / "agent" / "python").exists()  # nothing copied until a trial needs it


async def test_an_exec_in_a_trial_task_imports_it_too(runtime: ProcessRuntime, tmp_path: Path, groups: Groups) -> None:
    await runtime.start(start_task("a1", "sleep 3600", env=TRIAL), tmp_path / "a1")
    groups.add(runtime.process_group("a1"))
    session = await runtime.exec("a1", ExecRequest((sys.executable, "-c", SHOW)))
    try:
        out, err, code = await collect(session)
    finally:
        await session.kill()
    copy = next((tmp_path / "agent" / "python").iterdir())
    assert (out.decode().splitlines(), code) == ([str(copy / "pai_trial" / "__init__.py"), str(copy)], 0), err
