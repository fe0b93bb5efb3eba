"""Exit-code classification, in the spirit of OpenPAI's job exit spec.

Every exit an attempt can end with maps to a type (user / platform / resource) and a retry behaviour:
TRANSIENT exits are always retried and not counted against the retry budget, PERMANENT ones never,
UNKNOWN ones up to the job's retry count.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from enum import StrEnum

from pai.protocol.exitcodes import PlatformExit


class ExitType(StrEnum):
    SUCCEEDED = "succeeded"
    USER = "user"
    PLATFORM = "platform"
    RESOURCE = "resource"


class Retry(StrEnum):
    TRANSIENT = "transient"  # always retry, not counted
    PERMANENT = "permanent"  # never retry
    UNKNOWN = "unknown"  # retry up to the retry count

    def counts(self) -> bool:
        return self is Retry.UNKNOWN


@dataclass(frozen=True, slots=True)
class ExitSpec:
    code: int
    phrase: str
    type: ExitType
    retry: Retry
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "phrase": self.phrase,
            "type": self.type.value,
            "retry": self.retry.value,
            "reason": self.reason,
        }


P = PlatformExit
_TABLE: dict[int, tuple[str, ExitType, Retry, str]] = {
    0: ("Succeeded", ExitType.SUCCEEDED, Retry.PERMANENT, "the task's command exited 0"),
    P.UNKNOWN: ("Unknown", ExitType.PLATFORM, Retry.UNKNOWN, "the attempt ended for an unknown reason"),
    P.CONTAINER_START_FAILED: (
        "ContainerStartFailed",
        ExitType.PLATFORM,
        Retry.UNKNOWN,
        "the runtime could not create or start the container",
    ),
    P.IMAGE_NOT_FOUND: ("ImageNotFound", ExitType.USER, Retry.PERMANENT, "the Docker image does not exist"),
    P.IMAGE_PULL_FAILED: ("ImagePullFailed", ExitType.PLATFORM, Retry.TRANSIENT,
                          "the image's registry could not be reached"),
    P.CODE_DIR_MISSING: ("CodeDirMissing", ExitType.USER, Retry.PERMANENT, "codeDir does not exist"),
    P.CODE_DIR_TOO_LARGE: ("CodeDirTooLarge", ExitType.USER, Retry.PERMANENT, "codeDir is over the size limit"),
    P.CODE_DIR_INVALID: ("CodeDirInvalid", ExitType.USER, Retry.PERMANENT, "codeDir cannot be used"),
    P.CODE_DIR_UNAVAILABLE: ("CodeDirUnavailable", ExitType.PLATFORM, Retry.TRANSIENT,
                             "codeDir's file system cannot be reached"),
    P.LOCAL_PATH_NOT_ALLOWED: ("LocalPathNotAllowed", ExitType.PLATFORM, Retry.PERMANENT,
                               "a local path outside the cluster's allowed roots"),
    P.STORAGE_UNAVAILABLE: ("StorageUnavailable", ExitType.PLATFORM, Retry.UNKNOWN,
                            "a storage's directory is not on the node"),
    P.OOM_KILLED: ("OutOfMemory", ExitType.RESOURCE, Retry.UNKNOWN, "the container went over its memory limit"),
    P.NODE_LOST: ("NodeLost", ExitType.PLATFORM, Retry.TRANSIENT, "the node stopped reporting"),
    P.CONTAINER_LOST: ("ContainerLost", ExitType.PLATFORM, Retry.TRANSIENT, "the agent lost the container"),
    P.NODE_DISK_FULL: ("NodeDiskFull", ExitType.PLATFORM, Retry.TRANSIENT,
                       "the node's work directory is full or read-only"),
    P.PREEMPTED: ("Preempted", ExitType.PLATFORM, Retry.TRANSIENT, "preempted by the scheduler"),
    P.STOPPED: ("Stopped", ExitType.USER, Retry.PERMANENT, "stopped by a user"),
    P.COMPLETED_BY_POLICY: (
        "CompletedByPolicy",
        ExitType.PLATFORM,
        Retry.PERMANENT,
        "stopped because the job's completion policy was met",
    ),
    P.SHRUNK: ("Shrunk", ExitType.PLATFORM, Retry.PERMANENT, "stopped because its elastic job shrank"),
    # Signals seen as 128+N: the kernel's OOM killer (SIGKILL) is the usual cause of 137.
    128 + signal.SIGKILL: ("Killed", ExitType.RESOURCE, Retry.UNKNOWN, "killed (SIGKILL), often out of memory"),
    128 + signal.SIGTERM: ("Terminated", ExitType.USER, Retry.UNKNOWN, "terminated (SIGTERM)"),
    128 + signal.SIGINT: ("Interrupted", ExitType.USER, Retry.UNKNOWN, "interrupted (SIGINT)"),
    128 + signal.SIGSEGV: ("SegmentationFault", ExitType.USER, Retry.UNKNOWN, "segmentation fault (SIGSEGV)"),
    128 + signal.SIGABRT: ("Aborted", ExitType.USER, Retry.UNKNOWN, "aborted (SIGABRT)"),
}


def classify(code: int) -> ExitSpec:
    """The exit spec of an attempt's exit code."""
    row = _TABLE.get(code)
    if row is not None:
        return ExitSpec(code, *row)
    if 0 < code < 256:
        return ExitSpec(code, "UserError", ExitType.USER, Retry.UNKNOWN, f"the task's command exited {code}")
    return ExitSpec(code, "Unknown", ExitType.PLATFORM, Retry.UNKNOWN, f"unknown exit code {code}")
