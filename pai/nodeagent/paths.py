"""The agent's work directory layout, and the attempt ids that may name files in it.

```
<work-dir>/attempts/<attempt_id>/      stdout.log, stderr.log, code/ (the task's working directory)
<work-dir>/runtime/<runtime name>/     the runtime's state (one file per attempt)
<work-dir>/failed/<attempt_id>.json    attempts that failed before the runtime got them (code fetch)
<work-dir>/cache/code/                 the per-node codeDir cache
<work-dir>/epoch.json                  the highest launcher epoch seen (epoch.py)
<work-dir>/python/<digest>/pai_trial/  the agent's copy of pai_trial for trials' tasks (triallib.py)
```
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

_ATTEMPT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~:@+=-]{0,199}")


class InvalidAttemptIdError(ValueError):
    def __init__(self, attempt_id: str) -> None:
        super().__init__(f"attempt id {attempt_id!r} is not a plain token ([A-Za-z0-9._~:@+=-], at most 200)")
        self.attempt_id = attempt_id


def is_attempt_id(attempt_id: str) -> bool:
    """A plain token: safe as one file name (no separators, no ``..``, no leading dot)."""
    return _ATTEMPT_ID.fullmatch(attempt_id) is not None and ".." not in attempt_id


def check_attempt_id(attempt_id: str) -> str:
    if not is_attempt_id(attempt_id):
        raise InvalidAttemptIdError(attempt_id)
    return attempt_id


class LogStream(StrEnum):
    STDOUT = "stdout"
    STDERR = "stderr"

    @property
    def file_name(self) -> str:
        return f"{self.value}.log"


@dataclass(frozen=True, slots=True)
class AgentPaths:
    root: Path

    @property
    def attempts(self) -> Path:
        return self.root / "attempts"

    @property
    def failed(self) -> Path:
        return self.root / "failed"

    @property
    def code_cache(self) -> Path:
        return self.root / "cache" / "code"

    @property
    def python(self) -> Path:
        return self.root / "python"

    def runtime_state(self, runtime: str) -> Path:
        return self.root / "runtime" / runtime

    def attempt(self, attempt_id: str) -> Path:
        return self.attempts / check_attempt_id(attempt_id)

    def log_file(self, attempt_id: str, stream: LogStream) -> Path:
        return self.attempt(attempt_id) / stream.file_name
