"""Structured logging for the server processes: the agent's ``time LEVEL logger message k=v`` format."""

from __future__ import annotations

import logging
import os

from pai.nodeagent.logfmt import KeyValueFormatter


def setup_logging(process: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("PAI_LOG_LEVEL", "INFO").upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("pai").info("process starting", extra={"proc": process})
