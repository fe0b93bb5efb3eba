"""Structured logging for the server processes: ``time level logger message`` with key=value fields."""

from __future__ import annotations

import logging
import os


def setup_logging(process: str) -> None:
    level = os.environ.get("PAI_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(
        level=level,
        format=f"%(asctime)s %(levelname)s {process} %(name)s %(message)s",
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
