from __future__ import annotations

import pytest

from pai.launcher.exit_codes import ExitType, Retry, classify
from pai.protocol.exitcodes import PlatformExit

CASES = [
    ("success", 0, ExitType.SUCCEEDED, Retry.PERMANENT),
    ("user exit", 3, ExitType.USER, Retry.UNKNOWN),
    ("sigkill", 137, ExitType.RESOURCE, Retry.UNKNOWN),
    ("preempted", int(PlatformExit.PREEMPTED), ExitType.PLATFORM, Retry.TRANSIENT),
    ("node lost", int(PlatformExit.NODE_LOST), ExitType.PLATFORM, Retry.TRANSIENT),
    ("stopped", int(PlatformExit.STOPPED), ExitType.USER, Retry.PERMANENT),
    ("code dir missing", int(PlatformExit.CODE_DIR_MISSING), ExitType.USER, Retry.PERMANENT),
    ("image not found", int(PlatformExit.IMAGE_NOT_FOUND), ExitType.USER, Retry.PERMANENT),
    ("image pull failed", int(PlatformExit.IMAGE_PULL_FAILED), ExitType.PLATFORM, Retry.TRANSIENT),
    ("unknown negative", -9999, ExitType.PLATFORM, Retry.UNKNOWN),
]


@pytest.mark.parametrize(("name", "code", "kind", "retry"), CASES, ids=[c[0] for c in CASES])
def test_classify(name: str, code: int, kind: ExitType, retry: Retry) -> None:
    spec = classify(code)
    assert (spec.type, spec.retry) == (kind, retry)
    assert spec.to_dict()["code"] == code
