"""An elastic job's members file in its tasks, kept up to date by the agent (pai.nodeagent.members)."""

from __future__ import annotations

import json
from pathlib import Path

from pai.nodeagent import members
from pai.protocol import ContainerStatus
from pai.protocol.members import JobMembers, Member
from tests.eventually import eventually
from tests.nodeagent.builders import start_task
from tests.nodeagent.fake_master import FakeMaster
from tests.nodeagent.test_agent import config, reported, running

ONE = JobMembers("alice~job", {"worker": (Member(0, "10.0.0.1", {"rdzv": (20015,)}),)})
THREE = JobMembers("alice~job", {"worker": (Member(0, "10.0.0.1", {"rdzv": (20015,)}), Member(1, "10.0.0.2"),
                                            Member(2, "10.0.0.3"))})


def test_the_file_is_replaced_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = members.write(tmp_path, ONE)
    assert json.loads(path.read_text()) == {"worker": [{"index": 0, "host": "10.0.0.1", "ports": {"rdzv": [20015]}}]}
    inode = path.stat().st_ino
    members.write(tmp_path, THREE)
    assert [m["index"] for m in json.loads(path.read_text())["worker"]] == [0, 1, 2]
    assert path.stat().st_ino != inode  # renamed over, never rewritten in place: a reader sees one version
    assert sorted(p.name for p in members.directory(tmp_path).iterdir()) == ["members.json"]


def test_a_repeated_membership_is_not_written_again_and_a_start_does_not_undo_a_newer_one(tmp_path: Path) -> None:
    files = members.MembersFiles()
    assert files.update(tmp_path, "a1", ONE)
    assert not files.update(tmp_path, "a1", ONE)
    assert files.update(tmp_path, "a1", THREE)
    files.first(tmp_path, "a1", ONE)  # the start command's, older than the reply's
    assert len(json.loads((members.directory(tmp_path) / members.FILE).read_text())["worker"]) == 3


# The task waits until its file names three workers, printing what it read first and last.
WATCH = ('f="$PAI_ELASTIC_MEMBERS_FILE"; cat "$f"; echo; '
         'until grep -q \'"index":2\' "$f"; do sleep 0.05; done; cat "$f"')


async def test_a_running_task_sees_its_jobs_membership_change(tmp_path: Path, master: FakeMaster) -> None:
    master.send(start_task("a1", WATCH, job_key="alice~job", members=ONE),
                start_task("b1", 'echo "${PAI_ELASTIC_MEMBERS_FILE-unset}"', job_key="bob~rigid"))
    async with running(config(tmp_path, master.url)):
        await eventually(lambda: reported(master, "a1", ContainerStatus.RUNNING), what="a1 running")
        master.members = (THREE, JobMembers("carol~other", {"worker": ()}))  # another job's: not a1's
        done = await eventually(lambda: reported(master, "a1", ContainerStatus.EXITED), what="a1 saw 3 workers")
        rigid = await eventually(lambda: reported(master, "b1", ContainerStatus.EXITED), what="b1 ended")
    assert done.exit_code == 0
    out = (tmp_path / "agent" / "attempts" / "a1" / "stdout.log").read_text().splitlines()
    assert json.loads(out[0]) == ONE.document()  # there when it started
    assert json.loads(out[-1]) == THREE.document()
    assert rigid.exit_code == 0
    assert (tmp_path / "agent" / "attempts" / "b1" / "stdout.log").read_text().strip() == "unset"
