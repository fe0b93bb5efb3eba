"""The defaults of the launcher's timing that the scheduler's replay (``pai.vc.replay``) and the agent protocol also
use: one value each, here because ``pai.vc`` and ``pai.protocol`` may import only ``pai.domain``."""

from __future__ import annotations

GRACE_SECONDS = 10.0  # how long a stopped or preempted task gets between SIGTERM and SIGKILL (``--grace-seconds``)
FULL_PASS_SECONDS = 60.0  # how often the scheduler rebuilds its view from the store (``--full-pass-seconds``)
