"""An elastic job's membership as a file in each of its tasks (issue 31): ``{role: [{index, host, ports}]}``.

The file is ``elastic/members.json`` in the attempt's directory; the docker runtime binds that directory read-only
at ``/usr/local/pai/elastic`` (a directory, so a replaced file is seen inside). Both runtimes set
``PAI_ELASTIC_MEMBERS_FILE`` to where the task reads it. The agent writes it before the task starts (from the start
command) and again whenever a reply of the master carries a different membership, atomically: written to a
temporary file in the same directory, then renamed over the old one, so a reader sees one whole version or the next.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from pai.protocol.members import JobMembers

CONTAINER_DIR = "/usr/local/pai/elastic"
ENV = "PAI_ELASTIC_MEMBERS_FILE"
FILE = "members.json"


def directory(workdir: Path) -> Path:
    return workdir / "elastic"


def write(workdir: Path, members: JobMembers) -> Path:
    """Replace the attempt's members file with ``members``, atomically; the file's path."""
    target = directory(workdir)
    target.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".members-", suffix=".json", dir=target)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(members.document(), f, separators=(",", ":"))
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, target / FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target / FILE


class MembersFiles:
    """What the agent last wrote for each attempt, so that a reply that repeats a membership writes nothing."""

    def __init__(self) -> None:
        self._written: dict[str, JobMembers] = {}

    def update(self, workdir: Path, attempt_id: str, members: JobMembers) -> bool:
        """Write ``members`` for the attempt unless it already has them; whether it wrote."""
        if self._written.get(attempt_id) == members:
            return False
        write(workdir, members)
        self._written[attempt_id] = members
        return True

    def first(self, workdir: Path, attempt_id: str, members: JobMembers) -> None:
        """The start command's membership, unless a reply already brought one (newer) while the task was
        prepared."""
        if attempt_id not in self._written:
            self.update(workdir, attempt_id, members)

    def forget(self, keep: set[str]) -> None:
        """Drop what is remembered of attempts not in ``keep`` (ended and forgotten)."""
        self._written = {a: m for a, m in self._written.items() if a in keep}
