"""Structured logging for the server processes: the agent's ``time LEVEL logger message k=v`` format."""

from __future__ import annotations

import logging
import os
from typing import IO

from pai.nodeagent.logfmt import KeyValueFormatter


def setup_logging(process: str, stream: IO[str] | None = None) -> None:
    """Log lines to ``stream`` (stderr unless given) at PAI_LOG_LEVEL, INFO by default."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("PAI_LOG_LEVEL", "INFO").upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("pai").info("process starting", extra={"proc": process})
