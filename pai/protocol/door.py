"""What our HTTP servers (the master's port, an agent's log server) log of a request aiohttp's parser refuses.

aiohttp answers such a request itself (a 400 before any handler runs: a request line or header past its limit, too
many headers, not HTTP at all) and logs it as an ERROR with the parser's traceback, a dozen lines that anyone who
reaches the port can repeat. Our servers give aiohttp :data:`DOOR_LOGGER` (``handler_args={"logger": ...}``, a
public setting of its request handler), whose filter turns each refusal into one WARNING line (peer and reason;
aiohttp does not tell which method the request had) and lets at most :attr:`RefusalFilter.burst` of them through per
window; the first line of the next window says how many went unlogged (``refused_unlogged_before``). Anything else
logged there (a real failure) keeps its traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from aiohttp.http_exceptions import HttpProcessingError

WINDOW_SECONDS = 60.0
BURST = 10


class RefusalFilter(logging.Filter):
    """Rewrites aiohttp's "Error handling request" records for parser refusals; rate-limits them."""

    def __init__(self, burst: int = BURST, window: float = WINDOW_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.burst, self.window, self.clock = burst, window, clock
        self._window_start = -float("inf")
        self._logged = 0
        self._suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        now = self.clock()
        suppressed_before = 0
        if now - self._window_start >= self.window:
            suppressed_before, self._suppressed = self._suppressed, 0
            self._window_start, self._logged = now, 0
        if self._logged >= self.burst:
            self._suppressed += 1
            return False
        self._logged += 1
        peer = record.args[0] if isinstance(record.args, tuple) and record.args else None
        reason = " ".join(str(exc.message).split()) or type(exc).__name__
        record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        record.msg, record.args = "refused a malformed HTTP request", None
        record.exc_info, record.exc_text = None, None
        record.__dict__.update(peer=peer or "unknown", status=exc.code, reason=reason[:200])
        if suppressed_before:
            record.__dict__["refused_unlogged_before"] = suppressed_before
        return True


DOOR_LOGGER = logging.getLogger("pai.http.door")
DOOR_FILTER = RefusalFilter()
DOOR_LOGGER.addFilter(DOOR_FILTER)
