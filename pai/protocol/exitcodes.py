"""Exit codes the platform itself gives an attempt (negative, so they never clash with a process's).

User processes exit with 0..255 (128+N for signal N). The launcher classifies every code
(``pai.launcher.exit_codes``); both sides import these numbers from here.
"""

from __future__ import annotations

from enum import IntEnum


class PlatformExit(IntEnum):
    UNKNOWN = -1
    CONTAINER_START_FAILED = -100  # the runtime could not create or start the container
    IMAGE_NOT_FOUND = -101  # the registry says the image or tag does not exist
    IMAGE_PULL_FAILED = -102  # the registry could not be asked (DNS, connection, timeout, 5xx, rate limit)
    CODE_DIR_MISSING = -120  # codeDir does not exist or cannot be read
    CODE_DIR_TOO_LARGE = -121
    CODE_DIR_INVALID = -122  # a path escapes the directory (.., absolute names, links out)
    CODE_DIR_UNAVAILABLE = -123  # its file system (HDFS's namenode) cannot be reached: a platform error
    LOCAL_PATH_NOT_ALLOWED = -124  # a local codeDir/dataDir/outputDir outside the cluster's allowed roots
    OOM_KILLED = -130
    STORAGE_UNAVAILABLE = -140  # a storage's directory is not on the node
    NODE_LOST = -200  # the agent stopped reporting; the attempt is presumed gone
    CONTAINER_LOST = -201  # the agent no longer knows the container (e.g. agent restarted)
    NODE_DISK_FULL = -210  # the node's work directory is full or read-only: the node's fault, not the task's
    PREEMPTED = -300
    STOPPED = -400  # stopped by a user
    COMPLETED_BY_POLICY = -401  # stopped because the job completed (min succeeded/failed reached)
    SHRUNK = -402  # stopped because its elastic job shrank: dropped from the job once it exits, never a failure
